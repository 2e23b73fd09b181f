"""The tests' Node packages (tests/support/oidc, tests/support/openai_node), installed as
.ci/run and `make install-dev` install them, for a test run without either."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

NPM = shutil.which("npm")


def npm_ci_once(folder: Path, package: str) -> None:
    """`npm ci` in `folder` unless `package` is installed there: the lockfile's versions, from
    the npm registry or npm's own cache."""
    if (folder / "node_modules" / package).is_dir():
        return
    installed = subprocess.run(
        [str(NPM), "ci", "--prefer-offline", "--no-audit", "--no-fund"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if installed.returncode != 0:
        raise RuntimeError(f"npm ci in {folder} failed:\n{installed.stderr}")
