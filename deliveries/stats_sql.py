"""The endpoint statistics' one statement, written whole, with its SQLite twin.

One endpoint's EndpointMinute rows from %(start)s to %(end)s summed into buckets of
%(step)s seconds (bucket 0 starts at %(start)s, %(start_epoch)s in Unix seconds), through
the index `endpoint_minute_once` (endpoint_id, minute): a week is at most 10,080 rows of
one endpoint, whatever number of attempts they count, and at most 168 rows come back.
"""

from __future__ import annotations

ENDPOINT_BUCKETS = """
SELECT (extract(epoch FROM minute)::bigint - %(start_epoch)s) / %(step)s AS bucket,
    sum(success), sum(retryable), sum(fatal),
    sum(d_25), sum(d_50), sum(d_100), sum(d_250), sum(d_500), sum(d_1000), sum(d_2500),
    sum(d_5000), sum(d_10000), sum(d_more)
FROM deliveries_endpointminute
WHERE endpoint_id = %(endpoint_id)s AND minute >= %(start)s AND minute < %(end)s
GROUP BY bucket
"""

# SQLite stores the minute as text: strftime('%%s') reads it back as Unix seconds.
ENDPOINT_BUCKETS_SQLITE = """
SELECT (CAST(strftime('%%s', minute) AS INTEGER) - %(start_epoch)s) / %(step)s AS bucket,
    sum(success), sum(retryable), sum(fatal),
    sum(d_25), sum(d_50), sum(d_100), sum(d_250), sum(d_500), sum(d_1000), sum(d_2500),
    sum(d_5000), sum(d_10000), sum(d_more)
FROM deliveries_endpointminute
WHERE endpoint_id = %(endpoint_id)s AND minute >= %(start)s AND minute < %(end)s
GROUP BY bucket
"""
