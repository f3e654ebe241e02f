"""Suite-wide test settings. Hypothesis draws the same examples on every run (derandomize), so the suite's
outcome and duration do not depend on the draw; HYPOTHESIS_PROFILE=explore draws new examples each run."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
