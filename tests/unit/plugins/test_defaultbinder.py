import pytest

from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Status
from shoal.plugins import defaultbinder
from tests.unit.helpers import cache_with, handle_for, pod, state


class Recorder:
    def __init__(self, result: Status) -> None:
        self.calls: list[tuple[str, str]] = []
        self.result = result

    async def bind(self, pod: PodInfo, node: str) -> Status:
        self.calls.append((pod.uid, node))
        return self.result


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(Status(), id="bound"),
        pytest.param(Status.error("apiserver unavailable"), id="error-retried"),
        pytest.param(Status.error("409 conflict: already bound", requeue=False), id="conflict-not-retried"),
    ],
)
async def test_bind_delegates_to_binder_and_returns_its_status(result: Status) -> None:
    handle = handle_for(cache_with([]))
    handle.binder = Recorder(result)
    plugin = defaultbinder.new(None, handle)
    status = await plugin.bind(state(), pod("x"), "n1")
    assert status is result  # the status, requeue flag included, reaches the binding cycle as is
    assert handle.binder.calls == [("uid-x", "n1")]
