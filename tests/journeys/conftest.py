import sys
from pathlib import Path

# The repository root, so `gtp` imports however pytest is started.
REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
