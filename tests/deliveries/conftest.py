from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from deliveries.transport.sender import Sender
from tests.scripted_receivers import Behaviour, Receiver, answer


@pytest.fixture
def serve() -> Iterator[Callable[..., Receiver]]:
    receivers: list[Receiver] = []

    def start(behaviour: Behaviour = answer(200), **kwargs: Any) -> Receiver:
        receiver = Receiver(behaviour, **kwargs).start()
        receivers.append(receiver)
        return receiver

    yield start
    for receiver in receivers:
        receiver.close()


@pytest.fixture
def sender() -> Iterator[Sender]:
    sender = Sender(version="1.2.3", allow_private_networks=True).start()
    yield sender
    sender.close()
