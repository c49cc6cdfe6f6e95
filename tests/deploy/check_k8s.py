#!/usr/bin/python3
"""check_k8s.py - check Kubernetes manifests against the API's schemas and
against the rules of tileopsd's deployment (docs/operations.md, "Kubernetes").

    check_k8s.py [--source-dir DIR] [--expect-errors] PATH...

PATH is a YAML file or a folder of them (*.yaml, *.yml). Every document is
checked against the model class that the Kubernetes Python client generates
from the API's OpenAPI spec for its apiVersion and kind (python3-kubernetes):
unknown fields (by their exact JSON name), value types, and required fields
are errors, each named by its path (spec.template.spec.containers[0].name).
Then the rules no schema holds:

  - no pod shares the node's IPC or PID namespace (hostIPC, hostPID);
  - every container has resource requests for cpu and memory, every
    container of a workload (not an init container) readiness and liveness
    probes, and the daemon's a startup probe too;
  - the daemon's terminationGracePeriodSeconds exceeds its stop timeout by
    at least STOP_MARGIN_S: the stop timeout is the ConfigMap config's
    stop_timeout when set, else STOP_GRACE_SECONDS of
    daemon/front/server.c in the source tree;
  - the daemon's config sets arena_dir (clients of other pods share memory
    only through it), and its socket folder is a hostPath under /run (a
    tmpfs on the node);
  - every client pod mounts that hostPath at the daemon's mount path, and
    its TILEOPS_ADDRESS names a socket inside it.

Exit 0 when all is well, 1 with one line per error, 77 when
python3-kubernetes or python3-yaml is missing (ctest reports a skip).
With --expect-errors the files must fail: each "# expect: TEXT" comment
in them must match an error, and exit 0 means they failed as expected.
"""
import os
import re
import sys

try:
    import yaml
    from kubernetes import client as k8s_client
    from kubernetes.client import models as k8s_models
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"check_k8s.py: skipped: {e.name or e} is not installed "
          "(apt-get install python3-kubernetes python3-yaml)")
    sys.exit(77)

# A drain cut by SIGKILL loses in-flight work: the kubelet must wait at
# least this much beyond the daemon's own stop timeout (freeing device
# memory, exit, the script's own wait).
STOP_MARGIN_S = 5
WORKLOADS = ("Pod", "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job")
DAEMON_LABEL = "tileopsd"
# Resource quantities ("2", 500m, 8Gi): the models type them as strings,
# the API also takes plain numbers.
QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?$")
QUANTITY_FIELDS = {("V1ResourceRequirements", "limits"), ("V1ResourceRequirements", "requests"),
                   ("V1EmptyDirVolumeSource", "size_limit")}

_cfg = k8s_client.Configuration()
_cfg.client_side_validation = True
_required_cache = {}


def model_class(api_version, kind):
    """The generated model for apiVersion/kind, e.g. apps/v1 DaemonSet -> V1DaemonSet."""
    version = api_version.split("/")[-1]
    name = version[:1].upper() + version[1:] + kind
    return getattr(k8s_models, name, None)


def required_fields(cls):
    """The attributes whose setters refuse None under client-side validation."""
    if cls not in _required_cache:
        obj = cls.__new__(cls)
        obj.local_vars_configuration = _cfg
        req = set()
        for attr in cls.openapi_types:
            try:
                setattr(obj, attr, None)
            except ValueError:
                req.add(attr)
        _required_cache[cls] = req
    return _required_cache[cls]


def type_name(v):
    return type(v).__name__


def check_value(value, typ, path, errors, owner=None, attr=None):
    """Check value against an openapi type string; append errors."""
    if (owner, attr) in QUANTITY_FIELDS and typ.startswith("dict("):
        if not isinstance(value, dict):
            errors.append(f"{path}: expected a map of quantities, got {type_name(value)}")
            return
        for k, v in value.items():
            if isinstance(v, bool) or not isinstance(v, (str, int, float)) or \
                    not QUANTITY.match(str(v)):
                errors.append(f"{path}.{k}: '{v}' is not a resource quantity")
        return
    if (owner, attr) in QUANTITY_FIELDS:
        if isinstance(value, bool) or not QUANTITY.match(str(value)):
            errors.append(f"{path}: '{value}' is not a resource quantity")
        return
    if typ == "str":
        if not isinstance(value, str):
            errors.append(f"{path}: expected a string, got {type_name(value)} {value!r}")
    elif typ == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(f"{path}: expected an integer, got {type_name(value)} {value!r}")
    elif typ == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            errors.append(f"{path}: expected a number, got {type_name(value)} {value!r}")
    elif typ == "bool":
        if not isinstance(value, bool):
            errors.append(f"{path}: expected true or false, got {type_name(value)} {value!r}")
    elif typ == "datetime" or typ == "date":
        if not isinstance(value, str):
            errors.append(f"{path}: expected a timestamp string, got {type_name(value)}")
    elif typ == "object":
        # IntOrString in every field of the core and apps models.
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            errors.append(f"{path}: expected an integer or a string, got {type_name(value)}")
    elif typ.startswith("list[") and typ.endswith("]"):
        if not isinstance(value, list):
            errors.append(f"{path}: expected a list, got {type_name(value)}")
            return
        for i, item in enumerate(value):
            check_value(item, typ[5:-1], f"{path}[{i}]", errors)
    elif typ.startswith("dict(") and typ.endswith(")"):
        if not isinstance(value, dict):
            errors.append(f"{path}: expected a map, got {type_name(value)}")
            return
        inner = typ[5:-1].split(",", 1)[1].strip()
        for k, v in value.items():
            if not isinstance(k, str):
                errors.append(f"{path}: key {k!r} is not a string")
            check_value(v, inner, f"{path}.{k}", errors)
    else:
        cls = getattr(k8s_models, typ, None)
        if cls is None:
            errors.append(f"{path}: the schema names an unknown type {typ}")
            return
        check_model(value, cls, path, errors)


def check_model(doc, cls, path, errors):
    if not isinstance(doc, dict):
        errors.append(f"{path}: expected an object ({cls.__name__}), got {type_name(doc)}")
        return
    by_json = {j: a for a, j in cls.attribute_map.items()}
    for key, value in doc.items():
        where = f"{path}.{key}" if path else str(key)
        attr = by_json.get(key)
        if attr is None:
            errors.append(f"{where}: unknown field (not in {cls.__name__})")
            continue
        if value is None:
            continue
        check_value(value, cls.openapi_types[attr], where, errors, cls.__name__, attr)
    for attr in sorted(required_fields(cls)):
        key = cls.attribute_map[attr]
        if doc.get(key) is None:
            where = f"{path}.{key}" if path else key
            errors.append(f"{where}: required field missing ({cls.__name__})")


# ---- the deployment's own rules --------------------------------------------


def pod_spec(doc):
    """The pod spec of a workload document, or None."""
    spec = doc.get("spec") or {}
    if doc.get("kind") == "Pod":
        return spec
    if doc.get("kind") in WORKLOADS:
        return ((spec.get("template") or {}).get("spec")) or {}
    return None


def is_daemon(doc):
    labels = ((doc.get("metadata") or {}).get("labels")) or {}
    return doc.get("kind") == "DaemonSet" and labels.get("app.kubernetes.io/name") == DAEMON_LABEL


def stop_timeout(configs, source_dir, errors):
    """The daemon's stop timeout in seconds: the config's, else the code's default."""
    for text in configs:
        m = re.search(r"^\s*stop_timeout\s*=\s*([0-9.]+)\s*(s?)\s*$", text, re.M)
        if m:
            return float(m.group(1)), "stop_timeout in the ConfigMap"
    server_c = os.path.join(source_dir, "daemon", "front", "server.c")
    try:
        with open(server_c) as f:
            m = re.search(r"#define\s+STOP_GRACE_SECONDS\s+([0-9.]+)", f.read())
    except OSError:
        m = None
    if not m:
        errors.append(f"cannot find the daemon's stop timeout (STOP_GRACE_SECONDS in {server_c})")
        return None, None
    return float(m.group(1)), "STOP_GRACE_SECONDS in daemon/front/server.c"


def check_rules(docs, source_dir, errors):
    configs = []
    for _, doc in docs:
        if doc.get("kind") == "ConfigMap":
            configs += [v for k, v in (doc.get("data") or {}).items()
                        if k.endswith(".conf") and isinstance(v, str)]
    daemon_mount = None
    daemon_host_path = None
    for where, doc in docs:
        spec = pod_spec(doc)
        if spec is None:
            continue
        name = f"{where} {doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}"
        for key in ("hostIPC", "hostPID"):
            if spec.get(key):
                errors.append(f"{name}: {key} is true (the arena folder replaces it)")
        for group in ("initContainers", "containers"):
            for i, c in enumerate(spec.get(group) or []):
                cpath = f"{name}: {group}[{i}] ({c.get('name')})"
                req = ((c.get("resources") or {}).get("requests")) or {}
                for r in ("cpu", "memory"):
                    if r not in req:
                        errors.append(f"{cpath}: no resources.requests.{r}")
                if group != "containers":
                    continue
                probes = ["readinessProbe", "livenessProbe"]
                if is_daemon(doc):
                    probes.append("startupProbe")
                for p in probes:
                    if p not in c:
                        errors.append(f"{cpath}: no {p}")
        if is_daemon(doc):
            timeout, source = stop_timeout(configs, source_dir, errors)
            grace = spec.get("terminationGracePeriodSeconds", 30)
            if timeout is not None and not (isinstance(grace, int) and
                                            grace >= timeout + STOP_MARGIN_S):
                errors.append(f"{name}: terminationGracePeriodSeconds {grace} must exceed the "
                              f"daemon's stop timeout ({timeout:g} s, {source}) by at least "
                              f"{STOP_MARGIN_S} s")
            if not any(re.search(r"^\s*arena_dir\s*=\s*\S", t, re.M) for t in configs):
                errors.append(f"{name}: the ConfigMap's config sets no arena_dir: client pods "
                              "cannot share memory with the daemon")
            for v in spec.get("volumes") or []:
                hp = (v.get("hostPath") or {}).get("path")
                if not hp:
                    continue
                for c in spec.get("containers") or []:
                    for m in c.get("volumeMounts") or []:
                        if m.get("name") == v.get("name"):
                            daemon_mount, daemon_host_path = m.get("mountPath"), hp
            if daemon_host_path is None:
                errors.append(f"{name}: no hostPath volume for the sockets")
            elif not daemon_host_path.startswith("/run/"):
                errors.append(f"{name}: the socket folder {daemon_host_path} is not under /run "
                              "(a tmpfs on the node)")
    if daemon_host_path is None:
        return
    for where, doc in docs:
        spec = pod_spec(doc)
        if spec is None or is_daemon(doc):
            continue
        name = f"{where} {doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}"
        vols = {v.get("name") for v in spec.get("volumes") or []
                if (v.get("hostPath") or {}).get("path") == daemon_host_path}
        if not vols:
            errors.append(f"{name}: does not mount the daemon's folder {daemon_host_path}")
            continue
        for i, c in enumerate(spec.get("containers") or []):
            mounts = [m.get("mountPath") for m in c.get("volumeMounts") or []
                      if m.get("name") in vols]
            env = {e.get("name"): e.get("value") for e in c.get("env") or []}
            addr = env.get("TILEOPS_ADDRESS")
            if addr is None:
                continue
            if daemon_mount not in mounts:
                errors.append(f"{name}: containers[{i}] mounts {daemon_host_path} at {mounts}, "
                              f"the daemon at {daemon_mount}: socket paths would differ")
            elif not addr.startswith(f"ipc://{daemon_mount}/"):
                errors.append(f"{name}: containers[{i}] TILEOPS_ADDRESS {addr} is not a socket "
                              f"in {daemon_mount}")


def load(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p)
                            if f.endswith((".yaml", ".yml")))
        else:
            files.append(p)
    return files


def main(argv):
    args = argv[1:]
    expect = "--expect-errors" in args
    args = [a for a in args if a != "--expect-errors"]
    source_dir = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
    if args[:1] == ["--source-dir"]:
        source_dir, args = args[1], args[2:]
    files = load(args)
    if not files:
        print("check_k8s.py: no YAML files given")
        return 1
    errors, docs, expected = [], [], []
    for f in files:
        with open(f) as fh:
            text = fh.read()
        expected += [m.strip() for m in re.findall(r"^#\s*expect:\s*(.+)$", text, re.M)]
        try:
            loaded = list(yaml.safe_load_all(text))
        except yaml.YAMLError as e:
            errors.append(f"{f}: not YAML: {e}")
            continue
        for n, doc in enumerate(loaded):
            if doc is None:
                continue
            where = f"{f}#{n}"
            if not isinstance(doc, dict):
                errors.append(f"{where}: not a mapping")
                continue
            cls = model_class(str(doc.get("apiVersion", "")), str(doc.get("kind", "")))
            if cls is None:
                errors.append(f"{where}: unknown apiVersion/kind "
                              f"{doc.get('apiVersion')}/{doc.get('kind')}")
                continue
            schema_errors = []
            check_model(doc, cls, "", schema_errors)
            errors += [f"{where} {doc.get('kind')}: {e}" for e in schema_errors]
            docs.append((where, doc))
    check_rules(docs, source_dir, errors)
    for e in errors:
        print(e)
    if expect:
        missing = [x for x in expected if not any(x in e for e in errors)]
        for x in missing:
            print(f"check_k8s.py: expected an error containing '{x}', none came")
        if not errors or missing:
            print("check_k8s.py: FAIL: the broken manifests were not rejected as expected")
            return 1
        print(f"check_k8s.py: rejected as expected ({len(errors)} errors, "
              f"{len(expected)} expected ones among them)")
        return 0
    if errors:
        print(f"check_k8s.py: {len(errors)} errors in {len(files)} files")
        return 1
    print(f"check_k8s.py: {len(docs)} documents in {len(files)} files: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
