"""A job's code rules (training/rules_source.py): its source_dir lies in the project, its
entry_point in the folder and in the archive, its symlinks stay inside, and a packed secret is
named. Each with a spec that passes and one that fails (message asserted)."""

from __future__ import annotations

import os

from tests.conftest import MINIMAL
from tests.unit.test_rules import findings


def job(**keys: str) -> str:
    return MINIMAL + "".join(f"    {k}: {v}\n" for k, v in keys.items())


def test_source_dir_in_project(project):
    assert findings(project, "source-dir-in-project", job(source_dir="training_src")) == []
    outside = project.root.parent / "outside"
    (outside / "training_src").mkdir(parents=True)
    (outside / "training_src" / "train.py").write_text("print(1)\n")
    bad = job(source_dir="../outside/training_src")
    assert findings(project, "source-dir-in-project", bad) == [
        f"jobs.classifier.source_dir: '../outside/training_src' is outside the project "
        f"({outside.resolve() / 'training_src'} is not under {project.root.resolve()}); give a folder of "
        "the project, relative to its root"
    ]
    absolute = job(source_dir=str(outside / "training_src"))
    assert len(findings(project, "source-dir-in-project", absolute)) == 1
    # a folder of the project that is a symlink out of it is outside too
    os.symlink(outside / "training_src", project.root / "linked_src")
    assert findings(project, "source-dir-in-project", job(source_dir="linked_src"))[0].startswith(
        "jobs.classifier.source_dir: 'linked_src' is outside the project"
    )


def test_a_source_dir_outside_the_project_is_a_located_error(project):
    (project.root.parent / "outside").mkdir()
    (project.root.parent / "outside" / "train.py").write_text("print(1)\n")
    errors = project.spec(job(source_dir="../outside")).errors()
    assert any(
        e.startswith(
            "config/sagestack.yaml:9:17: jobs.classifier.source_dir: '../outside' is outside the project"
        )
        and e.endswith("[source-dir-in-project]")
        for e in errors
    ), errors


def test_entry_point_in_source_dir(project):
    assert findings(project, "entry-point-in-source-dir", job(entry_point="train.py")) == []
    (project.root / "training_src" / "pkg").mkdir()
    (project.root / "training_src" / "pkg" / "main.py").write_text("print(1)\n")
    assert findings(project, "entry-point-in-source-dir", job(entry_point="pkg/main.py")) == []
    for bad in ("/etc/passwd", "../config/sagestack.yaml", "pkg/../../x.py"):
        assert findings(project, "entry-point-in-source-dir", job(entry_point=bad)) == [
            f"jobs.classifier.entry_point: '{bad}' is not a path inside source_dir (training_src/); give it "
            "relative to that folder, e.g. train.py"
        ]
    os.symlink("/etc/hostname", project.root / "training_src" / "run.py")
    assert findings(project, "entry-point-in-source-dir", job(entry_point="run.py")) == [
        "jobs.classifier.entry_point: 'run.py' leads out of training_src/ (a symlink to /etc/hostname); the "
        "container would not find it"
    ]


def test_an_entry_point_the_archive_leaves_out_is_an_error(project):
    src = project.root / "training_src"
    (src / ".hidden.py").write_text("print(1)\n")
    assert findings(project, "entry-point-in-source-dir", job(entry_point=".hidden.py")) == [
        "jobs.classifier.entry_point: '.hidden.py' is left out of the archive by the pattern '.*' (the "
        "defaults); re-include it with '!.hidden.py' in training_src/.sagestackignore"
    ]
    (src / ".sagestackignore").write_text("!.hidden.py\nscripts/\n")
    assert findings(project, "entry-point-in-source-dir", job(entry_point=".hidden.py")) == []
    (src / "scripts").mkdir()
    (src / "scripts" / "go.py").write_text("print(1)\n")
    assert findings(project, "entry-point-in-source-dir", job(entry_point="scripts/go.py")) == [
        "jobs.classifier.entry_point: 'scripts/go.py' is left out of the archive by the pattern 'scripts/' "
        "(training_src/.sagestackignore); re-include it with '!scripts/go.py' in training_src/.sagestackignore"
    ]


def test_source_dir_contents(project, tmp_path):
    src = project.root / "training_src"
    (src / "model.py").write_text("X = 1\n")
    os.symlink("model.py", src / "alias.py")  # inside: packed as the file
    assert findings(project, "source-dir-contents", MINIMAL) == []
    secret = tmp_path / "credentials.txt"
    secret.write_text("aws_secret_access_key = …\n")
    os.symlink(secret, src / "creds.txt")
    os.symlink(src / "missing.py", src / "gone.py")
    (src / "pkg").mkdir()
    os.symlink("pkg", src / "lib")
    assert findings(project, "source-dir-contents", MINIMAL) == [
        f"jobs.classifier.source_dir: training_src/creds.txt is a symlink to {secret}, outside the source "
        "folder: the archive would hold a file from this machine only; copy the file in, or ignore the link "
        "in .sagestackignore",
        f"jobs.classifier.source_dir: training_src/gone.py is a symlink to {src / 'missing.py'}, which does "
        "not exist",
        "jobs.classifier.source_dir: training_src/lib is a symlink to the folder pkg: link each file, or move "
        "the folder here",
    ]
    (src / ".sagestackignore").write_text("creds.txt\ngone.py\nlib\n")
    assert findings(project, "source-dir-contents", MINIMAL) == []


def test_source_dir_secrets(project):
    src = project.root / "training_src"
    (src / ".env").write_text("TOKEN=x\n")
    (src / "server.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    assert findings(project, "source-dir-secrets", MINIMAL) == []  # ignored by default: not packed
    (src / ".sagestackignore").write_text("!.env\n!*.pem\n")
    assert findings(project, "source-dir-secrets", MINIMAL) == [
        "jobs.classifier.source_dir: 2 file(s) of training_src/ that look like secrets would be uploaded "
        "with the code: .env, server.pem"
    ]
    warnings = [w.format() for w in project.load().warnings]
    assert any("[source-dir-secrets]" in w and ".env, server.pem" in w for w in warnings), warnings


def test_source_dir_secrets_through_a_symlink_alias(project):
    """settings.txt -> .env packs the .env file's content under a harmless name: the link is judged by
    the names on its way and its target's path, and the warning names what it packs."""
    src = project.root / "training_src"
    (src / ".env").write_text("TOKEN=x\n")
    (src / ".env.d").mkdir()
    (src / ".env.d" / "app.conf").write_text("PASSWORD=x\n")
    (src / "notes").mkdir()
    (src / "notes" / "plain.txt").write_text("x\n")
    os.symlink(".env", src / "settings.txt")  # an alias of a secret-looking name
    os.symlink("settings.txt", src / "config.txt")  # a link to the alias: .env on its way
    os.symlink(".env.d/app.conf", src / "app.txt")  # the target's path in the folder looks like one
    os.symlink("notes/plain.txt", src / "plain.txt")  # a plain file: not a secret
    assert findings(project, "source-dir-secrets", MINIMAL) == [
        "jobs.classifier.source_dir: 3 file(s) of training_src/ that look like secrets would be uploaded "
        "with the code: app.txt (a link to .env.d/app.conf), config.txt (a link to .env), "
        "settings.txt (a link to .env)"
    ]
    (src / ".sagestackignore").write_text("settings.txt\nconfig.txt\napp.txt\n")
    assert findings(project, "source-dir-secrets", MINIMAL) == []
