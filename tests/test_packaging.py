"""The distribution installs one import package, ``guided``.

The card's top-level folders ``fsm/``, ``grammars/`` and ``watermark/`` install as
``guided.fsm``, ``guided.grammars`` and ``guided.watermark`` (``pyproject.toml``'s
package-dir), so nothing generic lands in site-packages and PyPI's ``watermark`` (an
IPython extension) installs beside guided without either overwriting the other.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"guided": "guided", "fsm": "guided.fsm", "grammars": "guided.grammars", "watermark": "guided.watermark"}


def _source_packages() -> set[str]:
    found = set()
    for folder, package in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join([package, *parts]))
    return found


def test_the_package_list_names_every_source_package():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(setup["packages"]) == _source_packages()
    assert setup["package-dir"] == {package: folder for folder, package in FOLDERS.items()}


@pytest.mark.subprocess
def test_a_wheel_installs_beside_pypi_watermark(tmp_path):
    # Build from a copy of the sources, so that the build leaves nothing in the checkout.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))

    def run(*cmd, cwd=tmp_path):
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"),
        str(src))
    (wheel,) = (tmp_path / "dist").glob("guided-*.whl")

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", str(venv))
    python = venv / "bin" / "python"
    run(str(python), "-m", "pip", "install", "-q", "watermark")  # PyPI's IPython extension
    run(str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel))
    # guided's dependencies (torch, numba, ...) come from this test's environment, after
    # the fresh venv's own packages. A path in a .pth file is not itself scanned for .pth
    # files, so this environment's editable-install finder stays out.
    site = Path(run(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    (site / "zz_guided_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    top_level = sorted(p.name for p in site.iterdir() if (p / "__init__.py").exists())
    assert "guided" in top_level and "watermark" in top_level
    assert not {"fsm", "grammars"} & set(top_level)

    check = textwrap.dedent(
        f"""
        import os
        import watermark
        import guided
        import guided.watermark
        from guided.fsm import compile_regex
        from guided.grammars.json_schema import compile_json_schema

        site = {str(site)!r}
        assert guided.__file__.startswith(site), guided.__file__
        assert guided.watermark.__file__.startswith(os.path.join(site, "guided", "watermark")), guided.watermark.__file__
        assert watermark.__file__.startswith(os.path.join(site, "watermark")), watermark.__file__
        assert callable(watermark.watermark)  # PyPI's watermark, untouched
        assert hasattr(guided.watermark, "WatermarkDetector")
        assert "json" in guided.Grammar.names()  # the shipped .lark files are in the wheel
        from guided.grammars.json_schema import format_dfas
        from guided.grammars.json_schema.scalars.formats import FORMATS
        assert format_dfas.ARCHIVE.get(FORMATS["uri"]) is not None  # and the formats' DFAs
        from guided.grammars import lark_frontend
        assert lark_frontend.COMMON_DFAS.get(lark_frontend.common_terminal_regexes()["WS"]) is not None
        assert compile_regex(r"[0-9]{{2}}").matches(b"42")
        assert compile_json_schema({{"type": "integer", "maximum": 20}}, "compact").matches(b"17")
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run([str(python), "-c", check], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr
