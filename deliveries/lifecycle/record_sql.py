"""The statements of recording, endpoint health and ordering keys, each written once and
whole, with named parameters.

Read these to know what recording a batch of attempts does to the database;
recording.py, health.py, attempt_stats.py and ordering.py only choose the variant and the
parameters.
A test pins the text (tests/deliveries/lifecycle/test_record_sql.py): a change here is a
change to how every result is written, and is made on purpose.

Recording runs for every batch a worker's recorder hands over (thousands of attempts a
second), so a batch's rows are one JSON parameter (encoded in C; a VALUES list of six
parameters a row was quoted one by one in Python, and its text, new for each batch size,
was parsed anew) and the statement's text is the same for 1 or 1,000 rows.

Twins: the statements named `…_SQLITE` are the embedded set-up's, for what PostgreSQL
does with an array; the states and the attempts are written through the ORM there
(recording.py). The rest run on both databases as they are.
"""

from __future__ import annotations

# Each claimed delivery's next state, if this claim still holds it (status `delivering`
# with the attempt count it was claimed with: a delivery whose lease lapsed and was taken
# again has another count); answers the ids written.
# - Due times count from the database's clock (statement_timestamp()), like claims and
#   leases, so no process's clock drift matters; a NULL delay leaves no due time (dead,
#   succeeded).
# - new_count: the claim's number given back when nothing was sent.
# - %(lowest)s and %(highest)s, the batch's lowest and highest ids, as constants: the
#   planner leaves out the partitions of history outside them (with a month of them a
#   batch took 1.9 ms, 0.45 with the lowest), DEFAULT and those made ahead included.
APPLY_STATES = """
UPDATE deliveries_delivery AS d SET status = v.status,
    next_attempt_at = statement_timestamp() + make_interval(secs => v.delay),
    lease_expires_at = NULL, last_error = v.last_error, attempt_count = v.new_count,
    updated_at = %(now)s
FROM json_to_recordset(%(states)s::json) AS v(
    id text, claimed_count int, status text, delay float8, last_error text, new_count int
)
WHERE d.id = v.id AND d.id BETWEEN %(lowest)s AND %(highest)s AND d.status = 'delivering'
    AND d.attempt_count = v.claimed_count
RETURNING d.id
"""

# APPLY_STATES for the lease sweep (`worker lost`): only deliveries whose lease has
# expired, so a worker recording the same delivery at this moment wins.
APPLY_STATES_IF_LEASE_EXPIRED = """
UPDATE deliveries_delivery AS d SET status = v.status,
    next_attempt_at = statement_timestamp() + make_interval(secs => v.delay),
    lease_expires_at = NULL, last_error = v.last_error, attempt_count = v.new_count,
    updated_at = %(now)s
FROM json_to_recordset(%(states)s::json) AS v(
    id text, claimed_count int, status text, delay float8, last_error text, new_count int
)
WHERE d.id = v.id AND d.id BETWEEN %(lowest)s AND %(highest)s AND d.status = 'delivering'
    AND d.attempt_count = v.claimed_count AND d.lease_expires_at < statement_timestamp()
RETURNING d.id
"""

# The attempt rows of a batch, after their deliveries' states (whose update they follow,
# endpoint_backlogs.py says why), from one JSON parameter as the states.
INSERT_ATTEMPTS = """
INSERT INTO deliveries_attempt (
    delivery_id, number, started_at, duration_ms, status_code, error, response_body
)
SELECT delivery_id, number, started_at, duration_ms, status_code, error, response_body
FROM json_to_recordset(%(attempts)s::json) AS a(
    delivery_id text, number int, started_at timestamptz, duration_ms int,
    status_code int, error text, response_body text
)
"""

# INSERT_ATTEMPTS for the lease sweep: an attempt its worker recorded after all (same
# delivery and number, `attempt_number_once`) is kept, the sweep's is dropped.
INSERT_ATTEMPTS_IGNORING_CONFLICTS = """
INSERT INTO deliveries_attempt (
    delivery_id, number, started_at, duration_ms, status_code, error, response_body
)
SELECT delivery_id, number, started_at, duration_ms, status_code, error, response_body
FROM json_to_recordset(%(attempts)s::json) AS a(
    delivery_id text, number int, started_at timestamptz, duration_ms int,
    status_code int, error text, response_body text
)
ON CONFLICT DO NOTHING
"""

# Of the live endpoints %(ids)s (a batch's endpoints whose every result succeeded), those
# whose circuit is not closed: they go through the locked path (health.py). Read without
# a lock: a circuit opened meanwhile by another batch stays open until its probe.
ENDPOINTS_NOT_CLOSED = """
SELECT id FROM webhooks_endpoint
WHERE id = ANY(%(ids)s::text[]) AND deleted_at IS NULL AND circuit_state <> 'closed'
"""

# ENDPOINTS_NOT_CLOSED on SQLite: %(ids)s a JSON array.
ENDPOINTS_NOT_CLOSED_SQLITE = """
SELECT id FROM webhooks_endpoint
WHERE id IN (SELECT value FROM json_each(%(ids)s)) AND deleted_at IS NULL
    AND circuit_state <> 'closed'
"""

# The rest of them are healthy: reset those that were failing, without a row lock
# (recorders of every worker would queue on it, one batch at a time). Conditional: a
# circuit opened since the read above, and an endpoint not failing, are left alone (the
# second spares a write and its row version for nothing).
FAILURES_RESET = """
UPDATE webhooks_endpoint SET consecutive_failures = 0, failing_since = NULL
WHERE id = ANY(%(ids)s::text[]) AND deleted_at IS NULL AND circuit_state = 'closed'
    AND (consecutive_failures > 0 OR failing_since IS NOT NULL)
"""

# FAILURES_RESET on SQLite: %(ids)s a JSON array.
FAILURES_RESET_SQLITE = """
UPDATE webhooks_endpoint SET consecutive_failures = 0, failing_since = NULL
WHERE id IN (SELECT value FROM json_each(%(ids)s)) AND deleted_at IS NULL
    AND circuit_state = 'closed'
    AND (consecutive_failures > 0 OR failing_since IS NOT NULL)
"""

# Whether any usable endpoint's circuit is not closed: asked before every claim, and
# nearly always no. Through the partial index `endpoint_circuit`.
ANY_CIRCUIT_NOT_CLOSED = """
SELECT 1 FROM webhooks_endpoint
WHERE circuit_state <> 'closed' AND is_active AND deleted_at IS NULL
LIMIT 1
"""

# Add a batch's attempts by outcome to the minute %(minute)s (AttemptMinute), one
# parameter per outcome (retry.Outcome) whatever the batch held: the same text every
# time, on PostgreSQL and SQLite alike.
# - WHERE n > 0: no row for an outcome the batch had none of. (It also tells SQLite's
#   parser that ON CONFLICT is the upsert's, not a join's.)
# - ON CONFLICT … DO UPDATE: concurrent recorders add up instead of overwriting.
ATTEMPT_MINUTES_ADD = """
INSERT INTO deliveries_attemptminute (minute, outcome, count)
SELECT %(minute)s, outcome, n FROM (
    SELECT 'success' AS outcome, %(success)s AS n
    UNION ALL SELECT 'retryable', %(retryable)s
    UNION ALL SELECT 'fatal', %(fatal)s
) AS counts
WHERE n > 0
ON CONFLICT (minute, outcome) DO UPDATE SET count = deliveries_attemptminute.count + EXCLUDED.count
"""

# Add one endpoint's attempts of the minute %(minute)s (EndpointMinute): counts by outcome
# and by duration bucket (attempt_stats.DURATION_BOUNDS_MS), run once per endpoint of a
# batch (executemany: one pipelined round trip on PostgreSQL), in endpoint order so two
# recorders never wait on each other's rows in opposite orders. The same on PostgreSQL
# and SQLite; concurrent recorders add up instead of overwriting.
ENDPOINT_MINUTES_ADD = """
INSERT INTO deliveries_endpointminute (
    endpoint_id, minute, success, retryable, fatal,
    d_25, d_50, d_100, d_250, d_500, d_1000, d_2500, d_5000, d_10000, d_more
) VALUES (
    %(endpoint_id)s, %(minute)s, %(success)s, %(retryable)s, %(fatal)s,
    %(d_25)s, %(d_50)s, %(d_100)s, %(d_250)s, %(d_500)s, %(d_1000)s, %(d_2500)s, %(d_5000)s,
    %(d_10000)s, %(d_more)s
)
ON CONFLICT (endpoint_id, minute) DO UPDATE SET
    success = deliveries_endpointminute.success + EXCLUDED.success,
    retryable = deliveries_endpointminute.retryable + EXCLUDED.retryable,
    fatal = deliveries_endpointminute.fatal + EXCLUDED.fatal,
    d_25 = deliveries_endpointminute.d_25 + EXCLUDED.d_25,
    d_50 = deliveries_endpointminute.d_50 + EXCLUDED.d_50,
    d_100 = deliveries_endpointminute.d_100 + EXCLUDED.d_100,
    d_250 = deliveries_endpointminute.d_250 + EXCLUDED.d_250,
    d_500 = deliveries_endpointminute.d_500 + EXCLUDED.d_500,
    d_1000 = deliveries_endpointminute.d_1000 + EXCLUDED.d_1000,
    d_2500 = deliveries_endpointminute.d_2500 + EXCLUDED.d_2500,
    d_5000 = deliveries_endpointminute.d_5000 + EXCLUDED.d_5000,
    d_10000 = deliveries_endpointminute.d_10000 + EXCLUDED.d_10000,
    d_more = deliveries_endpointminute.d_more + EXCLUDED.d_more
"""

# The last unfinished delivery of each (endpoint, key) of the pairs %(endpoint_ids)s[i],
# %(keys)s[i] (ordering.py: where a new delivery of that key joins its line), locked FOR
# SHARE until the caller's transaction ends, so the one finishing it waits and then sees
# the new delivery to release. Index delivery_ordering_line, one probe per pair. The
# statuses are UNFINISHED written as SQL literals: the planner matches them to the
# partial index's predicate, which a bound parameter in a generic plan would not.
LINE_ENDS = """
SELECT line.endpoint_id, line.ordering_key, last.id
FROM unnest(%(endpoint_ids)s::text[], %(keys)s::text[]) AS line(endpoint_id, ordering_key)
CROSS JOIN LATERAL (
    SELECT id FROM deliveries_delivery
    WHERE endpoint_id = line.endpoint_id AND ordering_key = line.ordering_key
        AND status IN ('pending', 'held', 'delivering')
    ORDER BY sequence DESC LIMIT 1 FOR SHARE
) AS last
"""
