"""pytest fixtures for tests that call a model through the `openai` SDK, recorded once by cuca
and replayed in CI with no network and no key (docs/ci.md).

Run the whole suite under `cuca run`, which starts cuca's proxy and points the SDK at it:

    # once, with a real key: every model call is recorded into tests/recordings
    cuca run --mode record --session tests --store tests/recordings \
        --upstream https://YOUR-PROVIDER -- pytest tests

    # in CI: answered from the recording; a call that differs, or a recorded call no test
    # asked for, fails the run and is named in cuca-replay.xml
    cuca run --mode replay --strict --session tests --store tests/recordings \
        --report cuca-replay.xml -- pytest tests

Each test gets its own conversation in the recording, named after the test, so tests can be
added, run in any order or in part, and a failure names the test it is about.
"""

import hashlib
import os
import re

import pytest
from openai import OpenAI

# What a conversation name may hold: cuca refuses ':' (it separates a point's sequence) and
# path separators; everything else of a pytest node id becomes '-'.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# A conversation is a file in a directory store: long parametrised node ids are cut and keep
# a digest of the whole id, so two ids that share a long prefix stay apart.
_MAX_NAME = 100


def conversation_name(nodeid):
    """The recording's conversation name for the test `nodeid`."""
    name = _UNSAFE.sub("-", nodeid).strip("-")
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(nodeid.encode()).hexdigest()[:12]
        name = f"{name[:_MAX_NAME]}-{digest}"
    return name


@pytest.fixture
def openai_client(request):
    """An `openai.OpenAI` client whose calls go through cuca's proxy, in the conversation of
    the test that asked for it. Outside `cuca run` the test fails, saying how to run it: a
    model test must not pass without its recording."""
    if "CUCA_PROXY_URL" not in os.environ:
        pytest.fail(
            "run the tests under `cuca run` (docs/ci.md): cuca run --mode replay --strict "
            "--session tests --store tests/recordings -- pytest",
            pytrace=False,
        )
    client = OpenAI(
        default_headers={"X-Cuca-Conversation": conversation_name(request.node.nodeid)}
    )
    yield client
    client.close()
