#!/usr/bin/env python3
"""gen_ops_table.py - write tileops/ops_table.json, the op signatures the
package builds tileops.ops from, out of the manifest.

    gen_ops_table.py TILEOPS_MANIFEST MANIFEST_DIR [OUT]     write OUT (default: the package's)
    gen_ops_table.py --check TILEOPS_MANIFEST MANIFEST_DIR   fail if the committed one differs

TILEOPS_MANIFEST is the tileops-manifest program (build/tools/manifest/);
its `json` command gives the whole manifest, of which the table keeps what a
caller needs: names, docs, tensors, params with defaults, and the roofline
vars that output shapes are written in. The table is committed (like
docs/ops.md) so that `pip install client/python` needs no build; ctest's
python_ops_table_is_current holds it to the manifest.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "tileops", "ops_table.json")


def table(tool, manifest):
    doc = json.loads(subprocess.run([tool, "-m", manifest, "json"], check=True,
                                    stdout=subprocess.PIPE).stdout)
    ops = []
    for op in sorted(doc["ops"], key=lambda o: o["name"]):
        def tensor(t, output):
            d = {"name": t["name"], "dtype": t["dtype"], "shape": t["shape"],
                 "optional": t["optional"], "doc": t["doc"]}
            if not output:
                d["mutated"] = t["mutated"]
            return d
        ops.append({
            "name": op["name"],
            "family": op["family"],
            "status": op["status"],
            "torch": op["torch"],
            "doc": op["doc"],
            "inputs": [tensor(t, False) for t in op["inputs"]],
            "outputs": [tensor(t, True) for t in op.get("outputs", [])],
            "params": [{k: p[k] for k in ("name", "type", "default", "range", "values", "doc")}
                       for p in op["params"]],
            "vars": [[k, v] for k, v in op["roofline"]["vars"].items()],
        })
    return json.dumps({"generated_by": "client/python/gen_ops_table.py", "ops": ops},
                      indent=1, sort_keys=False) + "\n"


def main(argv):
    check = argv[:1] == ["--check"]
    if check:
        argv = argv[1:]
    if len(argv) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    text = table(argv[0], argv[1])
    out = argv[2] if len(argv) == 3 else DEFAULT_OUT
    if check:
        with open(out) as f:
            if f.read() != text:
                sys.stderr.write("%s is not what the manifest gives; regenerate it with\n"
                                 "  client/python/gen_ops_table.py %s %s\n" % (out, argv[0], argv[1]))
                return 1
        print("%s matches the manifest" % out)
        return 0
    with open(out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
