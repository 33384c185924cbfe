"""Make ``import context`` find the library, not this directory.

Under pytest's ``prepend`` import mode ``tests/`` is on ``sys.path``, so ``tests/context``
(no ``__init__.py``) can shadow the editable-installed ``context`` package as a namespace
package. With the repository root on ``sys.path`` the regular package wins.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.append(_ROOT)
