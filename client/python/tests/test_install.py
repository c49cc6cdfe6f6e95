"""The package installed the two ways docs/python.md gives: pip into a venv
over Debian's setuptools with no package index, and cmake --install."""
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
BUILD = os.environ.get("TILEOPS_BUILD_DIR") or os.path.join(PKG, "..", "..", "build")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

pytestmark = pytest.mark.install

SMOKE = """
import sys, numpy as np, tileops
with tileops.connect(sys.argv[1]) as c:
    x = c.from_numpy(np.arange(8, dtype=np.float32))
    y = tileops.ops.add(x, x)
    assert (y.numpy() == 2 * np.arange(8)).all(), y.numpy()
print(tileops.__file__)
print(tileops.library_path())
"""


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "TILEOPS_LIBRARY", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(extra)
    return env


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    assert r.returncode == 0, "%s failed:\n%s" % (" ".join(cmd), r.stdout)
    return r.stdout


def test_pip_installs_into_a_venv_offline_and_runs_an_op(daemon, tmp_path):
    src = tmp_path / "src"
    # A copy: pip builds in the source folder and would leave build/ and egg-info there.
    shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    venv = tmp_path / "v"
    run([PYTHON, "-m", "venv", "--system-site-packages", str(venv)])
    env = clean_env(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", str(src)], env=env)
    lib = os.path.join(BUILD, "client", "libtileops.so")
    out = run([str(venv / "bin" / "python"), "-c", SMOKE, daemon.address], cwd=str(tmp_path),
              env=clean_env(TILEOPS_LIBRARY=lib)).split("\n")
    assert out[0].startswith(str(venv)), "imported %s, not the venv's" % out[0]
    assert os.path.realpath(out[1]) == os.path.realpath(lib)


def test_cmake_install_puts_the_package_where_python_finds_the_library(daemon, tmp_path):
    if not os.path.exists(os.path.join(BUILD, "cmake_install.cmake")):
        pytest.skip("no build tree at %s" % BUILD)
    prefix = tmp_path / "p"
    for comp in ("runtime", "python"):
        run(["cmake", "--install", BUILD, "--prefix", str(prefix), "--component", comp])
    ver = "%d.%d" % sys.version_info[:2] if PYTHON == sys.executable else \
        run([PYTHON, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]).strip()
    moved = tmp_path / "moved"
    prefix.rename(moved)  # _config.py names the library relative to itself
    site = moved / "lib" / ("python%s" % ver) / "dist-packages"
    assert (site / "tileops" / "_config.py").exists(), sorted(str(p) for p in moved.rglob("*"))
    out = run([PYTHON, "-c", SMOKE, daemon.address], cwd=str(tmp_path),
              env=clean_env(PYTHONPATH=str(site))).split("\n")
    assert out[0].startswith(str(site))
    assert out[1].startswith(str(moved)), "the installed package loaded %s" % out[1]
    # Debian's folder for distribution packages when the prefix is /usr.
    run(["cmake", "--install", BUILD, "--prefix", "/usr", "--component", "python"],
        env=dict(os.environ, DESTDIR=str(tmp_path / "d")))
    assert (tmp_path / "d" / "usr" / "lib" / "python3" / "dist-packages" / "tileops" /
            "ops_table.json").exists()
