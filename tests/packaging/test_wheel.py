"""The package as a user gets it: ``python -m build`` makes the sdist and, from it, the wheel; the
wheel with the paddle extra goes into a new virtual environment, and the demo runs there from an
empty folder (not the checkout), both as ``python -m fastcore_train`` and as the ``fastcore-train``
console script. Run by ``tox -e wheel`` (it sets FASTCORE_TRAIN_REQUIRE_WHEEL=1); minutes long,
so skipped elsewhere."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.environ.get("FASTCORE_TRAIN_REQUIRE_WHEEL") != "1",
                                reason="builds the package and installs it with paddle into a new venv (minutes); "
                                       "run by tox -e wheel (FASTCORE_TRAIN_REQUIRE_WHEEL=1)")
SDIST_MUST_CARRY = ("LICENSE", "README.md", "constraints.txt", "tox.ini", "mkdocs.yml", "pyproject.toml",
                    "tests/", "docs/", "examples/", "bench/", "fastcore_train/data/")


def run(command: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, **kwargs)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist and the wheel built from it (``python -m build``'s default)."""
    out = tmp_path_factory.mktemp("dist")
    built = run([sys.executable, "-m", "build", "--outdir", out, ROOT], timeout=900)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory):
    """A new virtual environment with the built wheel and its paddle extra (pinned by constraints.txt);
    removed after the module's tests, since it holds a ~1 GB copy of paddle that pytest would keep."""
    folder = tmp_path_factory.mktemp("venv") / "venv"
    made = run([sys.executable, "-m", "venv", folder], timeout=300)
    assert made.returncode == 0, made.stderr
    wheel = next(dist.glob("fastcore_train-*.whl"))
    installed = run([folder / "bin" / "python", "-m", "pip", "install", "--quiet", "-c", ROOT / "constraints.txt",
                     f"{wheel}[paddle]"], timeout=1800)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def user_environment(venv: Path) -> dict[str, str]:
    """What a new shell with the venv activated has: no variables of the checkout or of tox."""
    return {"HOME": os.environ.get("HOME", "/root"), "PATH": f"{venv / 'bin'}:/usr/bin:/bin", "LANG": "C.UTF-8"}


def test_the_sdist_carries_tests_docs_and_the_files_ci_needs(dist):
    sdist = next(dist.glob("fastcore_train-*.tar.gz"))
    with tarfile.open(sdist) as archive:
        names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
        pkg_info = archive.extractfile(next(m for m in archive.getmembers() if m.name.endswith("/PKG-INFO")))
        metadata = pkg_info.read().decode()
    for wanted in SDIST_MUST_CARRY:
        assert any(name == wanted or name.startswith(wanted) for name in names), f"the sdist lacks {wanted}"
    assert "tests/packaging/test_wheel.py" in names and not any("__pycache__" in name for name in names)
    assert "License-Expression: Apache-2.0" in metadata


def test_the_wheel_has_an_spdx_license_its_file_urls_and_classifiers(dist):
    wheel = next(dist.glob("fastcore_train-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert "Apache License" in archive_text(wheel, ".dist-info/licenses/LICENSE")
    for url in ("Homepage", "Documentation", "Issues"):
        assert re.search(rf"^Project-URL: {url}, https://", metadata, re.M), url
    assert "Classifier: Programming Language :: Python :: 3" in metadata
    assert "fastcore_train/data/digits.npz" in names
    assert not any(name.startswith("tests/") for name in names), "tests belong in the sdist, not the wheel"


def archive_text(wheel: Path, suffix: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(next(n for n in archive.namelist() if n.endswith(suffix))).decode()


@pytest.mark.parametrize("how", ["module", "console script"])
def test_the_demo_runs_from_the_installed_wheel_in_an_empty_folder(venv, tmp_path, how):
    command = ([venv / "bin" / "python", "-m", "fastcore_train"] if how == "module"
               else [venv / "bin" / "fastcore-train"])
    done = run([*command, "demo", "--driver", "paddle", "--epochs", "1"], cwd=tmp_path,
               env=user_environment(venv), timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    final = re.search(r"Final evaluation: acc#acc#test=([0-9.]+)", done.stdout)
    assert final and float(final.group(1)) > 0.5, done.stdout[-3000:]
    assert (tmp_path / "demo_output" / "checkpoint" / "meta.json").is_file()


def test_the_installed_package_is_the_wheel_and_names_its_command(venv, tmp_path):
    environment = user_environment(venv)
    where = run([venv / "bin" / "python", "-c", "import fastcore_train; print(fastcore_train.__file__)"],
                cwd=tmp_path, env=environment, timeout=120)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr
    module_help = run([venv / "bin" / "python", "-m", "fastcore_train", "--help"], cwd=tmp_path, env=environment,
                      timeout=120)
    script_help = run([venv / "bin" / "fastcore-train", "--help"], cwd=tmp_path, env=environment, timeout=120)
    assert module_help.stdout.startswith("usage: python -m fastcore_train "), module_help.stdout
    assert script_help.stdout.startswith("usage: fastcore-train "), script_help.stdout


def test_a_missing_framework_is_one_line_with_its_install_hint(venv, tmp_path):
    done = run([venv / "bin" / "fastcore-train", "demo", "--driver", "torch", "--epochs", "1"], cwd=tmp_path,
               env=user_environment(venv), timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "fastcore-train demo: error: The 'torch' backend needs the 'torch' package, which is not installed. "
        'Install it with: pip install "fastcore-train[torch]"'], done.stderr
