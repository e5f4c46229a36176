"""The test receivers themselves: what e2e tests count must be what the worker sent."""

from __future__ import annotations

import http.client
import socket
import struct
import threading
import time

from tests.receivers import Receiver

# struct tcp_info (linux/tcp.h): 8 bytes of u8 fields, then u32s; tcpi_total_retrans is
# the 24th u32. It counts a retransmitted SYN too.
TCP_INFO_SIZE = 104
TOTAL_RETRANS = struct.Struct("=I")
TOTAL_RETRANS_OFFSET = 8 + 23 * 4


def retransmissions(sock: socket.socket) -> int:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_SIZE)
    return TOTAL_RETRANS.unpack_from(info, TOTAL_RETRANS_OFFSET)[0]


def test_concurrent_webhooks_to_a_busy_receiver_arrive_together():
    # A receiver whose accept loop is held up (a busy test process) while 10 webhooks
    # connect at once: none may be a second late (a connection dropped from a full accept
    # queue and tried again), or a test counts it as sent after what it was sent before.
    # The kernel says whether a connection had to be tried again (its SYN or its request
    # sent a second time): a count, where an arrival time would race a loaded machine.
    receiver = Receiver()
    port = receiver._server.server_address[1]
    answers: list[int] = []
    retransmitted: list[int] = []

    def post(i: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/hook", body=b"{}", headers={"webhook-id": str(i)})
        answers.append(connection.getresponse().status)
        assert connection.sock is not None
        retransmitted.append(retransmissions(connection.sock))
        connection.close()

    senders = [threading.Thread(target=post, args=(i,)) for i in range(10)]
    for sender in senders:
        sender.start()
    time.sleep(0.3)  # every connection is waiting to be accepted (more wait: no matter)
    receiver.start()
    try:
        for sender in senders:
            sender.join(timeout=10)
    finally:
        receiver.stop()
    assert answers == [200] * 10
    assert retransmitted == [0] * 10
