"""The test receivers themselves: what e2e tests count must be what the worker sent."""

from __future__ import annotations

import http.client
import threading
import time

from tests.receivers import Receiver


def test_concurrent_webhooks_to_a_busy_receiver_arrive_together():
    # A receiver whose accept loop is held up (a busy test process) while 10 webhooks
    # connect at once: none may be a second late (a connection dropped from a full accept
    # queue and tried again), or a test counts it as sent after what it was sent before.
    receiver = Receiver()
    port = receiver._server.server_address[1]
    answers: list[int] = []

    def post(i: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/hook", body=b"{}", headers={"webhook-id": str(i)})
        answers.append(connection.getresponse().status)
        connection.close()

    senders = [threading.Thread(target=post, args=(i,)) for i in range(10)]
    for sender in senders:
        sender.start()
    time.sleep(0.3)  # every connection is waiting to be accepted
    started = time.time()
    receiver.start()
    try:
        for sender in senders:
            sender.join(timeout=10)
    finally:
        receiver.stop()
    assert answers == [200] * 10
    assert max(r.at for r in receiver.requests) - started < 0.5
