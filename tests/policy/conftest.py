"""Makes `policy.gtp_policy` (repository root) and the record builders (this folder) importable."""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPOSITORY_ROOT = HERE.parents[1]
for path in (str(REPOSITORY_ROOT), str(HERE)):
    if path not in sys.path:
        sys.path.insert(0, path)
