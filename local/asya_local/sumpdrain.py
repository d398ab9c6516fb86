"""Fail the envelopes waiting in a queue that is about to disappear, through x-sump, instead of losing them.

Used where an actor's queue goes away while it still holds envelopes: an actor the local mesh no longer declares
(``asya_local.orphans``), and an actor a deploy removes, under ``asya deploy --force`` (``asya_local.preview``). Each
envelope received is sent to x-sump as ``UnknownActor`` with ``final_by_sump`` (x-sump writes the task's ``failed``
status and checkpoint at once, instead of the task waiting for its deadline), then deleted from the queue. A body
that does not parse goes to x-sump as ``ParseError`` with what could be salvaged of it.

A message is deleted only after its send to x-sump succeeded: a failed send raises (``SendError``), and the message
comes back to its queue when its visibility timeout ends.
"""

from __future__ import annotations

from typing import Any, Final

from asya import routing
from asya.envelope import Reason, parse_envelope, salvage_envelope
from asya.exceptions import EnvelopeParseError
from asya.timeutil import Clock, format_ts
from asya.transport import Transport

__all__ = ["drain_to_sump", "fail_to_sump"]

#: Seconds a received message stays hidden while it is sent to x-sump; a failed send returns it to the queue after it.
_VISIBILITY: Final = 30


def fail_to_sump(transport: Transport, *, actor: str, body: str, message: str, clock: Clock) -> None:
    """Send the envelope ``body`` (last addressed to ``actor``) to x-sump, failing its task with ``message``."""
    now = format_ts(clock())
    trace = routing.Trace.for_hop({}, enabled=False)
    try:
        envelope = parse_envelope(body)
    except EnvelopeParseError as exc:
        salvaged = salvage_envelope(body, new_id=routing.new_uuid4, unknown_route=routing.unknown_route)
        out = routing.sump_envelope(
            reason=Reason.PARSE_ERROR, message=str(exc), actor=actor, now=now, envelope=salvaged, trace=trace
        )
    else:
        out = routing.sump_envelope(
            reason=Reason.UNKNOWN_ACTOR,
            message=message,
            actor=actor,
            now=now,
            envelope=envelope,
            trace=trace,
            original_payload=envelope.payload,
            final_by_sump=True,
        )
    transport.send(out.actor, out.envelope)


def drain_to_sump(sqs: Any, url: str, *, actor: str, transport: Transport, message: str, clock: Clock) -> int:
    """Receive every visible message of the queue at ``url`` and fail it through x-sump; the number sent. Messages
    in flight (received by someone else) are left: they are counted by the caller, never waited for."""
    sent = 0
    while True:
        messages = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=_VISIBILITY
        ).get("Messages", [])
        if not messages:
            return sent
        for received in messages:
            fail_to_sump(transport, actor=actor, body=str(received.get("Body", "")), message=message, clock=clock)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=received["ReceiptHandle"])
            sent += 1
