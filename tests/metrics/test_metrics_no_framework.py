"""The metrics package must stay framework-free: numpy and the standard library only."""
import ast
from pathlib import Path

import fastcore_train.metrics

FRAMEWORKS = {"torch", "paddle", "jittor", "oneflow", "tensorflow", "jax"}


def test_no_module_of_the_metrics_package_imports_a_framework():
    package_dir = Path(fastcore_train.metrics.__file__).parent
    offenders = []
    for path in sorted(package_dir.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            offenders += [f"{path.name}: {name}" for name in names if name.split(".")[0] in FRAMEWORKS]
    assert not offenders, offenders
