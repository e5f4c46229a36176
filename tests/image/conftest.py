"""The image test runs only under `make test-image` (HOMING_IMAGE_TEST=1).

It installs podman, builds images and takes minutes: `make test` and `make test-fast`
collect nothing here, while CI runs it as a step of its own after `make test`.
"""

from __future__ import annotations

import os

collect_ignore_glob = [] if os.environ.get("HOMING_IMAGE_TEST") == "1" else ["test_*.py"]
