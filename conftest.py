"""Test-wide settings: offline, no stray API keys."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# The tests speak only to loopback servers they start: a proxy or an OpenAI endpoint configured on the machine
# must not reach them (a test about those variables sets its own).
for _name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
              "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
    os.environ.pop(_name, None)

# Property tests judge their inputs, not the machine's speed: on a loaded CI machine generating examples may be slow,
# which is not a failure of the code under test (tests that set their own health checks keep them).
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("loaded-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("loaded-machine")
