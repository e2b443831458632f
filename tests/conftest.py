import pytest

pytest_plugins = ["tests.ray_cluster"]


@pytest.fixture
def anyio_backend():
    # mitmproxy runs only on asyncio
    return "asyncio"
