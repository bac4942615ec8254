"""What sourcedir.tar.gz holds (core/sourcedir.py): no dotfiles, caches or secret-looking files by
default, a .sagestackignore read the way git reads a .gitignore (git itself is the judge), symlinks
inside packed as their file, and the same bytes for the same code."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagestack.core.sourcedir import (
    DEFAULT_IGNORED,
    IGNORE_FILE,
    SourceDirError,
    pack_source_dir,
    select_source_files,
)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        return {m.name: m for m in tar.getmembers()}


CODE = {"train.py": "print(1)\n", "pkg/util.py": "X = 1\n", "requirements.txt": "numpy\n"}
JUNK = {
    ".env": "AWS_SECRET_ACCESS_KEY=abc\n",
    ".env.local": "TOKEN=x\n",
    ".git/config": "[core]\n",
    ".venv/bin/python": "#!\n",
    ".ipynb_checkpoints/x.ipynb": "{}",
    "pkg/.DS_Store": "x",
    "__pycache__/train.cpython-311.pyc": "junk",
    "pkg/__pycache__/util.cpython-311.pyc": "junk",
    "pkg/old.pyc": "junk",
    "server.pem": "-----BEGIN PRIVATE KEY-----\n",
    "tls/client.key": "k",
    "id_rsa": "k",
    "id_ed25519.pub": "k",
    "credentials": "[default]\n",
    "cert.p12": "k",
}


def test_dotfiles_caches_and_secrets_are_not_packed_by_default(tmp_path):
    archive = pack_source_dir(_tree(tmp_path / "src", {**CODE, **JUNK}))
    assert archive.files == ("pkg/util.py", "requirements.txt", "train.py")
    assert sorted(_members(archive.data)) == ["pkg", "pkg/util.py", "requirements.txt", "tls", "train.py"]
    # the same code without the junk: the same bytes, so the same content-addressed job names
    assert archive.data == pack_source_dir(_tree(tmp_path / "clean", CODE | {"tls/.keep": ""})).data


def test_a_sagestackignore_leaves_out_and_brings_back(tmp_path):
    src = _tree(tmp_path / "src", {**CODE, **JUNK, "data/big.csv": "1\n", "notes.md": "x", "docs/a.md": "y"})
    (src / IGNORE_FILE).write_text(
        "# what the job does not need\n"
        "data/\n"
        "*.md\n"
        "!docs/a.md\n"
        "!.env.local\n"  # re-included past the defaults: packed, and the rule warns
        "!.git/config\n"  # inside an ignored folder: cannot be re-included (as in git)
    )
    selection = select_source_files(src)
    assert selection.files == (".env.local", "docs/a.md", "pkg/util.py", "requirements.txt", "train.py")
    assert selection.secret_files() == (".env.local",)
    excluded = selection.excluded("data/big.csv")
    assert excluded is not None and (excluded.text, excluded.source) == ("data/", IGNORE_FILE)
    excluded = selection.excluded(".git/config")
    assert excluded is not None and (excluded.text, excluded.source) == (".*", "the defaults")
    assert selection.excluded("train.py") is None
    assert pack_source_dir(src).files == selection.files


def test_a_symlink_inside_is_packed_as_its_file_and_one_leading_out_is_refused(tmp_path):
    src = _tree(tmp_path / "src", CODE)
    os.symlink("pkg/util.py", src / "util_alias.py")
    members = _members(pack_source_dir(src).data)
    assert members["util_alias.py"].isfile() and members["util_alias.py"].size == len("X = 1\n")
    outside = _tree(tmp_path / "home", {".aws/credentials": "[default]\n"})
    os.symlink(outside / ".aws" / "credentials", src / "aws.txt")
    with pytest.raises(SourceDirError) as e:
        pack_source_dir(src)
    assert str(e.value) == (
        f"{src} cannot be packed: aws.txt is a symlink to {outside / '.aws' / 'credentials'}, outside the "
        "source folder: the archive would hold a file from this machine only; copy the file in, or ignore "
        "the link in .sagestackignore"
    )
    (src / IGNORE_FILE).write_text("aws.txt\n")
    assert "aws.txt" not in pack_source_dir(src).files


# ---------------------------------------------------------------- git is the judge of the patterns

PATHS = [
    "train.py",
    "a.md",
    "docs/a.md",
    "docs/deep/b.md",
    "build/out.bin",
    "src/build/keep.py",
    "src/x.py",
    "src/x.pyc",
    "logs/2024/run.log",
    "data/set[1].csv",
    "weird #name.txt",
    "trailing.txt",
    "foo/bar/baz.txt",
    "Foo.txt",
    ".hidden/file.txt",
    ".config.yaml",
    "q.key",
    "notes/.env.example",
]
PATTERNS = [
    "*.md",
    "!docs/a.md",
    "/a.md",
    "docs/**/*.md",
    "build/",
    "/build/",
    "**/build",
    "src/*.pyc",
    "!*.pyc",
    "logs/**",
    "!logs/2024/",
    "data/set\\[1\\].csv",
    "weird\\ #name.txt",
    "\\#*",
    "trailing.txt   ",
    "foo/**/baz.txt",
    "[Ff]oo.txt",
    "?oo.txt",
    "!.hidden/",
    "!.config.yaml",
    "!*.key",
    "!.env.example",
    "**/notes",
    "!notes/",
    "# a comment",
    "",
]


def _git_packs(root: Path, lines: list[str]) -> set[str]:
    """The files git leaves untracked-and-not-ignored under the same patterns (defaults first)."""
    (root / ".gitignore").write_text("\n".join([*DEFAULT_IGNORED, *lines]) + "\n")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(root),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "--others", "--exclude-standard", "-z"],
        check=True,
        env=env,
        capture_output=True,
        text=True,
    ).stdout
    return {p for p in listed.split("\0") if p}


@pytest.mark.skipif(shutil.which("git") is None, reason="git judges the ignore patterns")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(PATTERNS), max_size=8))
def test_the_ignore_file_means_what_it_means_to_git(tmp_path_factory, lines):
    root = _tree(tmp_path_factory.mktemp("judged"), {p: "x\n" for p in PATHS})
    (root / IGNORE_FILE).write_text("\n".join(lines) + "\n")
    ours = set(select_source_files(root).files)
    assert ours == _git_packs(root, lines), lines


def test_a_symlink_to_a_secret_is_named_whatever_it_is_called(tmp_path):
    """The archive packs a link's target content; the secrets check judges what is packed."""
    src = _tree(tmp_path / "src", {**CODE, ".env": "TOKEN=x\n", "conf/.netrc": "machine x\n"})
    os.symlink(".env", src / "settings.txt")
    os.symlink("../conf/.netrc", src / "pkg" / "hosts.txt")
    selection = select_source_files(src)
    assert "settings.txt" in pack_source_dir(src).files  # packed, with the .env file's content
    assert selection.secret_files() == ("pkg/hosts.txt", "settings.txt")
    alias = selection.link("pkg/hosts.txt")
    assert alias is not None and (alias.target, alias.hops) == ("conf/.netrc", (".netrc",))
    assert selection.link("train.py") is None


def test_an_executable_file_stays_executable_and_the_rest_do_not_become_so(tmp_path):
    """The container runs what it unpacks: a `.sh` entry point (or a helper the script execs) must
    keep its executable bit, and a plain file must not gain one, whatever the umask here."""
    root = _tree(tmp_path / "src", {"run.sh": "#!/bin/sh\necho hi\n", "train.py": "print(1)\n"})
    (root / "run.sh").chmod(0o700)  # executable by its owner only: still executable in the archive
    (root / "train.py").chmod(0o666)
    (root / "pkg").mkdir()
    members = _members(pack_source_dir(root).data)
    assert members["run.sh"].mode == 0o755
    assert members["train.py"].mode == 0o644
    assert members["pkg"].mode == 0o755 and members["pkg"].isdir()
    from sagestack.core.sourcedir import unpack_source_archive

    out = tmp_path / "out"
    unpack_source_archive(pack_source_dir(root).data, out)
    assert os.access(out / "run.sh", os.X_OK) and not os.access(out / "train.py", os.X_OK)


def test_the_archive_records_no_trace_of_the_machine_that_packed_it(tmp_path):
    """Same code, same bytes: no mtime, owner or file name of this machine in the tar or gzip header."""
    first = _tree(tmp_path / "a", {"train.py": "print(1)\n", "pkg/util.py": "X = 1\n"})
    second = _tree(tmp_path / "b", {"pkg/util.py": "X = 1\n", "train.py": "print(1)\n"})
    os.utime(second / "train.py", (1_000_000, 1_000_000))
    data = pack_source_dir(first).data
    assert pack_source_dir(second).data == data
    assert data[4:8] == b"\0\0\0\0" and not data[3] & 0x08  # gzip: mtime 0, no FNAME
    for m in _members(data).values():
        assert (m.mtime, m.uid, m.gid, m.uname, m.gname) == (0, 0, 0, "", "")
    assert list(_members(data)) == ["pkg", "pkg/util.py", "train.py"]


def test_a_dockerfile_images_fingerprint_follows_its_files_args_and_target(tmp_path):
    from sagestack.core.sourcedir import dockerfile_fingerprint

    folder = _tree(tmp_path / "img", {"Dockerfile": "FROM x\n", "app/run.sh": "echo\n"})
    base = dockerfile_fingerprint(folder, {"A": "1"}, "train")
    assert dockerfile_fingerprint(folder, {"A": "1"}, "train") == base
    assert dockerfile_fingerprint(folder, {"A": "2"}, "train") != base
    assert dockerfile_fingerprint(folder, {"A": "1"}, None) != base
    _tree(folder, {".git/HEAD": "ref\n", "__pycache__/x.pyc": "0"})  # neither is part of the image's make-up
    assert dockerfile_fingerprint(folder, {"A": "1"}, "train") == base
    (folder / "app" / "run.sh").rename(folder / "app" / "go.sh")  # same bytes, another name
    assert dockerfile_fingerprint(folder, {"A": "1"}, "train") != base
    (folder / "app" / "go.sh").rename(folder / "app" / "run.sh")
    (folder / "app" / "run.sh").write_text("echo 2\n")
    assert dockerfile_fingerprint(folder, {"A": "1"}, "train") != base


# Each case: patterns and the paths they judge; git decides which are packed. The cases reach the
# corners of the format: bracket classes ([!…], [^…], a ']' as the first member, an unclosed '['),
# '**' next to a slash and not, escapes, '?', comments, folder-only patterns, trailing spaces (dropped
# unless escaped; a tab is kept), names with a newline, a lone '/', an anchored name starting with X.
JUDGED_CASES = [
    (
        ["[!a]1.txt", "[^c]2.txt", "[]x]3.txt", "[!]x]4.txt", "[ab"],
        ["a1.txt", "b1.txt", "c2.txt", "d2.txt", "]3.txt", "x3.txt", "y3.txt", "]4.txt", "z4.txt", "x4.txt"],
    ),
    (["[ab", "q[]", "foo\\"], ["[ab", "a", "q[]", "q", "foo\\", "foo"]),
    (
        ["x**", "!xdir/", "logs/**", "!logs/x/", "**/cache", "a/**/b.txt"],
        ["logs/x/y.txt", "xdir/keep.txt", "xfile", "s/cache/c.txt", "a/b.txt", "a/q/r/b.txt", "keep.txt"],
    ),
    (
        ["*.log", "file?.txt", "x\\*", "\\#hash", "#comment", "outX/", "build/", "*.X", "b\\ ", "tab\t", "c   "],
        [
            "a.log", "xlog", "file1.txt", "file12.txt", "x*", "xa", "#hash", "#comment", "outX/f", "out/f",
            "build", "sub/build/f", "a.X", "a.", "b ", "b", "tab\t", "tab", "c", "c ",
        ],
    ),
    (["/", "*.log"], ["a.log", "b.txt"]),
    (
        ["[ab]-[cd].txt", "[a]z.txt", "[^]x]5.txt", "[ab]*[cd].txt"],
        ["axc.txt", "bc.txt", "a-c.txt", "b-d.txt", "a.txt", "c.txt", "-.txt", "az.txt", "bz.txt", "]5.txt", "x5.txt", "y5.txt"],
    ),
    (["*/"], ["top.txt", "sub/f.txt"]),
    (["/Xtop", "deep/**", "*.log"], ["Xtop", "top", "sub/Xtop", "deep/x\ny.txt", "a\nb/c.log", "a\nb/c.txt"]),
]  # fmt: skip


@pytest.mark.skipif(shutil.which("git") is None, reason="git judges the ignore patterns")
@pytest.mark.parametrize(("lines", "paths"), JUDGED_CASES)
def test_each_corner_of_the_ignore_format_means_what_it_means_to_git(tmp_path, lines, paths):
    root = _tree(tmp_path, {p: "x\n" for p in paths})
    (root / IGNORE_FILE).write_text("\n".join(lines) + "\n")
    selection = select_source_files(root)
    assert set(selection.files) == _git_packs(root, lines), lines
    # excluded() names a pattern for exactly the files the walk leaves out (it judges each folder above)
    assert {p for p in paths if selection.excluded(p) is None} == set(selection.files) & set(paths)


def test_a_dockerfile_images_fingerprint_does_not_follow_the_order_build_args_are_written_in(tmp_path):
    from sagestack.core.sourcedir import dockerfile_fingerprint

    folder = _tree(tmp_path / "img", {"Dockerfile": "FROM x\n"})
    assert dockerfile_fingerprint(folder, {"A": "1", "B": "2"}, None) == dockerfile_fingerprint(
        folder, {"B": "2", "A": "1"}, None
    )


def test_a_re_included_secret_is_named_at_any_depth_and_a_link_by_its_own_name(tmp_path):
    src = _tree(tmp_path / "src", {**CODE, "conf/.env": "T=1\n", "a/b/.env": "T=2\n", "a/b/notes.txt": "n\n"})
    (src / IGNORE_FILE).write_text("!.env\n!id_rsa\n")
    os.symlink("a/b/notes.txt", src / "id_rsa")  # its content is not a key, its name says it is one
    selection = select_source_files(src)
    assert selection.secret_files() == ("a/b/.env", "conf/.env", "id_rsa")


def test_each_link_that_cannot_be_packed_is_named_in_one_refusal(tmp_path):
    src = _tree(tmp_path / "src", CODE)
    os.symlink("missing.py", src / "a.py")
    os.symlink("pkg", src / "b")
    with pytest.raises(SourceDirError) as e:
        pack_source_dir(src)
    assert str(e.value) == (
        f"{src} cannot be packed: a.py is a symlink to missing.py, which does not exist; "
        "b is a symlink to the folder pkg: link each file, or move the folder here"
    )


def test_the_archives_sha256_is_of_its_bytes_and_a_member_leading_out_is_not_unpacked(tmp_path):
    import hashlib

    from sagestack.core.sourcedir import unpack_source_archive

    archive = pack_source_dir(_tree(tmp_path / "src", CODE))
    assert archive.sha256 == hashlib.sha256(archive.data).hexdigest()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"x\n"))
    (tmp_path / "dest").mkdir()
    with pytest.raises(tarfile.OutsideDestinationError):
        unpack_source_archive(gzip.compress(raw.getvalue()), tmp_path / "dest")
    assert not (tmp_path / "escaped.txt").exists()


def test_an_ignore_file_with_a_byte_that_is_not_utf8_is_still_read(tmp_path):
    src = _tree(tmp_path / "src", {**CODE, "run.log": "x\n"})
    (src / IGNORE_FILE).write_bytes(b"caf\xe9.txt\n*.log\n")  # latin-1, as an old editor saves it
    assert "run.log" not in select_source_files(src).files


@pytest.mark.skipif(shutil.which("git") is None, reason="git judges the ignore patterns")
def test_a_folder_pattern_does_not_match_a_link_to_a_file(tmp_path):
    """git stores a symlink as a blob: `notes/` leaves out a folder, not a link named notes."""
    src = _tree(tmp_path / "src", {"a.txt": "x\n", "pkg/b.txt": "y\n"})
    os.symlink("a.txt", src / "notes")
    lines = ["notes/"]
    (src / IGNORE_FILE).write_text("\n".join(lines) + "\n")
    assert set(select_source_files(src).files) == _git_packs(src, lines) == {"a.txt", "notes", "pkg/b.txt"}
