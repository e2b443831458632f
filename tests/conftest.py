import pytest


@pytest.fixture
def anyio_backend():
    # mitmproxy runs only on asyncio
    return "asyncio"
