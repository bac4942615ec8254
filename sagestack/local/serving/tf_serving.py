"""A TensorFlow SavedModel answered as SageMaker's TensorFlow Serving container answers it.

The container (aws/sagemaker-tensorflow-serving-container, now in aws/deep-learning-containers)
serves a model.tar.gz without code/inference.py through nginx: its njs script (tensorflowServing.js)
takes a Content-Type of exactly application/json, application/jsonlines, application/jsons or
text/csv (anything else is 415 `{"error": "Unsupported Media Type: <type>"}`), turns JSON Lines,
CSV and bare JSON arrays into TF Serving's `{"instances": [...]}`, and passes the request to TF
Serving's REST predict API, whose status and `{"error": "..."}` body it returns as they are. It does
not refuse any Accept: a JSON or JSON Lines Accept names the response's Content-Type, the body is
TF Serving's JSON whatever is asked. The model is the latest numeric version folder holding
saved_model.pb under /opt/ml/model (tfs_utils.find_models: `<model>/<version>/saved_model.pb`).

TF Serving's JSON (tensorflow_serving/util/json_tensor.cc): `{"instances": [...]}` (row format,
answered `{"predictions": [...]}`) or `{"inputs": ...}` (columnar, answered `{"outputs": ...}`), an
optional `signature_name` (default serving_default); each value must be of the input's dtype (a
number for a float, an integer for an int, ...) and every instance of one shape. Its errors are
INVALID_ARGUMENT, a 400; only a failure of the server itself is a 500.

This module does the same with TensorFlow in this process (imported only here, only for a
SavedModel): `load_tf_handlers` gives `local serve` the Handlers it runs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagestack.local.serving.handlers import JSON, ClientError, Handlers, ServeError

SAVED_MODEL = "saved_model.pb"
JSONL = "application/jsonlines"
CSV = "text/csv"
# tensorflowServing.js compares the header as a whole: `application/json; charset=utf-8` is a 415.
CONTAINER_TYPES = (JSON, JSONL, "application/jsons", CSV)
DEFAULT_SIGNATURE = "serving_default"
_TFS_JSON = re.compile(r'"(instances|inputs|examples)"\s*:')
_JSON_LINES = re.compile(r"[}\]]\s*[\[{]")
_CSV_FIRST = re.compile(r'\s*("|[\d.Ee+\-]+)')


def saved_model_version(model_dir: Path) -> Path | None:
    """The version folder TF Serving would serve: of the first model folder (sorted) holding
    `<version>/saved_model.pb`, its highest numeric version; None when there is no SavedModel."""
    if not model_dir.is_dir():
        return None
    found = sorted(p.parent for p in model_dir.rglob(SAVED_MODEL) if p.parent.name.isdigit())
    if not found:
        return None
    base = found[0].parent
    return max((v for v in found if v.parent == base), key=lambda v: int(v.name))


@dataclass
class TfModel:
    """A loaded SavedModel: its signatures (name -> concrete function) and the version served."""

    path: Path
    signatures: dict[str, Any]
    loaded: Any = None  # the restored object: it keeps the functions' variables alive

    def inputs(self, signature: str) -> dict[str, Any]:
        """name -> TensorSpec of the signature's inputs."""
        return dict(self.signatures[signature].structured_input_signature[1])

    @property
    def sample_shape(self) -> tuple[int, ...] | None:
        """One sample's shape for a single-input default signature (None when unknown)."""
        if DEFAULT_SIGNATURE not in self.signatures:
            return None
        specs = list(self.inputs(DEFAULT_SIGNATURE).values())
        if len(specs) != 1 or specs[0].shape.rank is None:
            return None
        dims = specs[0].shape.as_list()[1:]
        return None if any(d is None for d in dims) else tuple(dims)


@dataclass(frozen=True)
class TfRequest:
    """A predict request as TF Serving reads it: row or columnar, the signature and its tensors."""

    row: bool
    signature: str
    tensors: dict[str, Any]  # input name -> numpy array of the input's dtype


def load_tf_handlers(model_dir: Path) -> Handlers:
    """Load the SavedModel under model_dir (TensorFlow imported here) as `local serve`'s handlers."""
    version = saved_model_version(model_dir)
    if version is None:
        raise ServeError(f"no SavedModel under {model_dir} (<version>/{SAVED_MODEL}, e.g. model/1/)")
    if (model_dir / "code" / "inference.py").exists():
        raise ServeError(
            f"{model_dir / 'code' / 'inference.py'}: the TensorFlow Serving container runs such a script "
            "in its python service (input_handler / output_handler), which `local serve` does not "
            "emulate; serve the SavedModel without code/ here"
        )
    import tensorflow as tf  # type: ignore[import-untyped,unused-ignore]

    try:
        loaded = tf.saved_model.load(str(version))
    except Exception as e:  # a corrupt or incompatible bundle: the container's TF Serving fails too
        raise ServeError(f"TensorFlow cannot load the SavedModel {version}: {e}") from None
    signatures = dict(loaded.signatures)
    if not signatures:
        raise ServeError(f"the SavedModel {version} has no serving signature (export it with model.export)")
    model = TfModel(version, signatures, loaded)
    return Handlers(model=model, input_fn=input_fn_for(model), predict_fn=predict_fn, output_fn=output_fn)


# ---------------------------------------------------------------- nginx + njs: the body as TFS JSON


def tfs_json(body: bytes | str, content_type: str | None) -> str:
    """The body as the container's njs script passes it to TF Serving (415 for other types)."""
    if content_type not in CONTAINER_TYPES:
        raise ClientError(415, f"Unsupported Media Type: {content_type or 'Unknown'}")
    if isinstance(body, bytes):
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise ClientError(400, "JSON Parse error: Invalid encoding in string.") from None
    else:
        text = body
    if content_type == CSV:
        return _csv_instances(text)
    if _TFS_JSON.search(text):
        return text
    if _JSON_LINES.search(text):
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        return '{"instances":' + (lines[0] if len(lines) == 1 else "[" + ",".join(lines) + "]") + "}"
    data = text if re.match(r"^\s*\[\s*\[", text) else "[" + text + "]"
    return '{"instances":' + data + "}"


def _csv_instances(text: str) -> str:
    """Each CSV line an instance: numbers as they are, a line of several columns as a list."""
    quote = _CSV_FIRST.match(text) is None
    rows = []
    for line in (raw.strip() for raw in text.strip().splitlines()):
        if not line:
            continue
        fields = line.split(",")
        values = [json.dumps(f) if quote else f for f in fields]
        rows.append("[" + ",".join(values) + "]" if len(fields) > 1 else values[0])
    return '{"instances":[' + ",".join(rows) + "]}"


# ---------------------------------------------------------------- TF Serving's REST predict API


def input_fn_for(model: TfModel) -> Any:
    def input_fn(body: bytes | str, content_type: str | None) -> TfRequest:
        return parse_predict(model, tfs_json(body, content_type))

    return input_fn


def _bad(message: str) -> ClientError:
    return ClientError(400, message)


def parse_predict(model: TfModel, text: str) -> TfRequest:
    """TF Serving's reading of a predict request (every mistake a 400 naming it)."""
    if not text.strip():
        raise _bad("JSON Parse error: The document is empty")
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise _bad(f"JSON Parse error: {e}") from None
    except RecursionError:
        raise _bad("JSON Parse error: the document is nested too deeply") from None
    if not isinstance(doc, dict):
        raise _bad(f"JSON Value: {text.strip()[:200]} Is not object")
    signature = doc.get("signature_name", DEFAULT_SIGNATURE)
    if not isinstance(signature, str):
        raise _bad("'signature_name' key must be a string value.")
    if signature not in model.signatures:
        raise _bad(
            f'Serving signature name: "{signature}" not found in signature def; the model has: '
            f"{', '.join(sorted(model.signatures))}"
        )
    specs = model.inputs(signature)
    if "instances" in doc and "inputs" in doc:
        raise _bad("Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist")
    if "instances" in doc:
        instances = doc["instances"]
        if not isinstance(instances, list):
            raise _bad("Excepting 'instances' to be an list/array")
        if not instances:
            raise _bad("No values in 'instances' array")
        return TfRequest(True, signature, _rows(instances, specs))
    if "inputs" in doc:
        return TfRequest(False, signature, _columns(doc["inputs"], specs))
    raise _bad("Missing 'inputs' or 'instances' key")


def _rows(instances: list[Any], specs: dict[str, Any]) -> dict[str, Any]:
    named = isinstance(instances[0], dict)
    if not named and len(specs) > 1:
        raise _bad(
            "instances is a plain list, but expecting list of objects as multiple input tensors "
            f"required as per tensorinfo_map ({', '.join(sorted(specs))})"
        )
    columns: dict[str, list[Any]] = {name: [] for name in specs}
    for i, item in enumerate(instances):
        if isinstance(item, dict) != named:
            want, got = ("object", "list") if named else ("value/list", "object")
            raise _bad(f"Expecting {want} but got {got} at item {i} of input list")
        values = item if named else {next(iter(specs)): item}
        if set(values) != set(specs):
            raise _bad(
                f"Failed to process element: {i} of 'instances' list. JSON object must only have "
                f"keys: {','.join(sorted(specs))}"
            )
        for name, value in values.items():
            columns[name].append(value)
    return {
        name: _tensor(values, specs[name], f"'instances' (input {name})") for name, values in columns.items()
    }


def _columns(inputs: Any, specs: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(inputs, dict):
        if len(specs) > 1:
            raise _bad(
                "inputs is a plain value/list, but expecting an object as multiple input tensors "
                f"required as per tensorinfo_map ({', '.join(sorted(specs))})"
            )
        inputs = {next(iter(specs)): inputs}
    tensors = {}
    for name, spec in specs.items():
        if name not in inputs:
            raise _bad(f"Missing named input: {name} in 'inputs' object.")
        tensors[name] = _tensor(inputs[name], spec, f"'inputs' (input {name})")
    return tensors


def _tensor(value: Any, spec: Any, where: str) -> Any:
    """A dense array of the input's dtype and a shape its TensorSpec accepts."""
    import numpy as np

    dtype = spec.dtype
    try:
        if dtype.is_floating:
            _check_leaves(value, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), dtype)
        elif dtype.is_integer:
            _check_leaves(value, lambda v: isinstance(v, int) and not isinstance(v, bool), dtype)
        elif dtype.is_bool:
            _check_leaves(value, lambda v: isinstance(v, bool), dtype)
        elif dtype.name == "string":
            _check_leaves(value, lambda v: isinstance(v, str), dtype)
        array = np.asarray(value, dtype=dtype.as_numpy_dtype)
    except (ValueError, OverflowError) as e:
        raise _bad(f"{where}: {e}") from None
    if array.dtype == object:
        raise _bad(f"{where}: the lists are not all of one length (a tensor is rectangular)")
    if not spec.shape.is_compatible_with(array.shape):
        want = "[" + ",".join("?" if d is None else str(d) for d in spec.shape.as_list()) + "]"
        got = "[" + ",".join(map(str, array.shape)) + "]"
        raise _bad(f"{where}: the model takes shape {want} (? any size); got {got}")
    return array


def _check_leaves(value: Any, ok: Any, dtype: Any) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(v)
        elif not ok(v):
            kind = type(v).__name__ if v is not None else "null"
            raise ValueError(
                f"JSON Value: {json.dumps(v)} Type: {kind} is not of expected type: {dtype.name}"
            )


def predict_fn(request: TfRequest, model: TfModel) -> tuple[TfRequest, dict[str, Any]]:
    """The signature's outputs (an INVALID_ARGUMENT the graph raises is a 400, as TF Serving maps it)."""
    import tensorflow as tf  # type: ignore[import-untyped,unused-ignore]

    function = model.signatures[request.signature]
    try:
        outputs = function(**{k: tf.constant(v) for k, v in request.tensors.items()})
    except tf.errors.InvalidArgumentError as e:
        raise _bad(e.message.strip().splitlines()[-1] if e.message.strip() else str(e)) from None
    return request, {name: tensor.numpy() for name, tensor in outputs.items()}


def output_fn(result: tuple[TfRequest, dict[str, Any]], accept: str) -> tuple[bytes, str]:
    """TF Serving's JSON answer; the njs script names it by the Accept when that asks for JSON or
    JSON Lines (the first type listed), else it goes out as application/json (nginx's default)."""
    request, outputs = result
    values = {name: _plain(array) for name, array in outputs.items()}
    if request.row:
        if len(values) == 1:
            body: dict[str, Any] = {"predictions": next(iter(values.values()))}
        else:
            rows = len(next(iter(outputs.values())))
            body = {"predictions": [{k: v[i] for k, v in values.items()} for i in range(rows)]}
    else:
        body = {"outputs": next(iter(values.values())) if len(values) == 1 else values}
    types = [t.strip() for t in (accept or "").split(",")]
    kind = types[0] if (JSON in types or JSONL in types) else JSON
    return json.dumps(body, separators=(",", ":")).encode(), kind


def _plain(array: Any) -> Any:
    """Nested lists; a float32 written as its shortest round-trip decimal, as TF Serving writes it."""
    import numpy as np

    if array.dtype == np.float32:
        return np.vectorize(lambda v: float(str(v)), otypes=[object])(array).tolist() if array.size else []
    if array.dtype.kind in "SO":
        return np.vectorize(lambda v: v.decode() if isinstance(v, bytes) else v, otypes=[object])(
            array
        ).tolist()
    return array.tolist()
