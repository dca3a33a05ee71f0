"""Print an absolute path to a working Python X.Y (stdlib only; run by run.sh).

The template tests use it too (tests/conftest.py). Looks at: TEMPLATE_PYTHON_X_Y, pythonX.Y on
PATH, pyenv versions, /usr/bin and /usr/local/bin, then uv-managed interpreters (uv path as
the second argument). pyenv shims resolve per directory, so each candidate is asked for
its real `sys.executable`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def probe(candidate: str, version: str) -> str | None:
    try:
        result = subprocess.run(
            [
                candidate,
                "-c",
                "import sys; print('%d.%d' % sys.version_info[:2]); print(sys.executable)",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=ROOT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = result.stdout.split()
    if result.returncode or len(lines) != 2 or lines[0] != version:
        return None
    return lines[1]


def _version_key(path: str) -> tuple[int, ...]:
    match = re.search(r"/versions/(\d+(?:\.\d+)*)", path)
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def candidates(version: str, uv: str | None) -> list[str]:
    """Where Python `version` may be, most specific first (uv-managed ones last)."""
    found: list[str] = []
    override = os.environ.get(f"TEMPLATE_PYTHON_{version.replace('.', '_')}")
    if override:
        found.append(override)
    on_path = shutil.which(f"python{version}")
    if on_path:
        found.append(on_path)
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found += sorted(
        (str(p) for p in pyenv.glob(f"{version}*/bin/python{version}")),
        key=_version_key,
        reverse=True,
    )
    found += [f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    if uv:
        env = {**os.environ, "UV_PYTHON_PREFERENCE": "only-managed", "UV_PYTHON_DOWNLOADS": "never"}
        result = subprocess.run(
            [uv, "python", "find", version], capture_output=True, text=True, env=env, check=False
        )
        if result.returncode == 0 and result.stdout.strip():
            found.append(result.stdout.strip())
    return found


def find(version: str, uv: str | None) -> str | None:
    """The real interpreter of the first candidate that runs and is Python `version`."""
    for candidate in candidates(version, uv):
        real = probe(candidate, version)
        if real:
            return real
    return None


def main() -> int:
    version = sys.argv[1]
    real = find(version, sys.argv[2] if len(sys.argv) > 2 else None)
    if real:
        print(real)
        return 0
    print(
        f"Python {version} not found; set TEMPLATE_PYTHON_{version.replace('.', '_')}",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
