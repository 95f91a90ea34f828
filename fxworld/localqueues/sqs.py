"""moto's SQS server, and what an SQS event source mapping does around it.

:class:`MotoServer` runs ``moto_server`` on a free port. :class:`EventSourceMapping`
polls a queue (receive, up to 10 messages), invokes the handler in a fresh
process per batch under a time limit (SIGKILL when it runs over, as Lambda ends
a function that timed out), and deletes only the messages the handler did not
list in ``batchItemFailures``; a crashed or killed invocation deletes nothing,
so SQS delivers the batch again after the visibility timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import boto3

from fxworld.localqueues.ports import free_port

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class MotoServer:
    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        exe = Path(sys.executable).with_name("moto_server")
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(exe), "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=out,
                stderr=out,
                env={**os.environ, **CREDENTIALS},
            )
        sqs = self.client()
        deadline = time.monotonic() + 30
        while True:
            try:
                sqs.list_queues()
                return
            except Exception as e:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"moto_server did not start: {self.log.read_text()}") from e
                time.sleep(0.1)

    def client(self) -> Any:
        return boto3.client(
            "sqs",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def queue(self, name: str, visibility: int) -> str:
        made = self.client().create_queue(
            QueueName=name, Attributes={"VisibilityTimeout": str(visibility)}
        )
        return str(made["QueueUrl"])

    def holds_messages(self, queue: str) -> bool:
        """Whether ``queue`` still holds a message, visible or in flight."""
        left = self.client().get_queue_attributes(
            QueueUrl=queue,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return any(int(v) for v in left.values())

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class EventSourceMapping:
    """Polls ``queue_url`` in a thread; see the module. ``env``: the function's
    environment. ``invocations``, ``killed``, ``deleted``: counts."""

    def __init__(
        self,
        server: MotoServer,
        queue_url: str,
        env: dict[str, str],
        *,
        time_limit: float,
        margin: float,
        lease: float,
        log: Path,
    ) -> None:
        self.sqs = server.client()
        self.queue_url = queue_url
        self.env = {**os.environ, **CREDENTIALS, **env}
        self.time_limit = time_limit
        self.margin = margin
        self.lease = lease
        self.log = log
        self.invocations = 0
        self.killed = 0
        self.crashed = 0
        self.deleted = 0
        self.received = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self, pollers: int = 1) -> None:
        for _ in range(pollers):
            t = threading.Thread(target=self._poll, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)

    def _poll(self) -> None:
        while not self._stop.is_set():
            got = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=1,
                AttributeNames=["ApproximateReceiveCount"],
            )
            messages = got.get("Messages") or []
            if messages:
                self.received += len(messages)
                self._invoke(messages)

    def _invoke(self, messages: list[dict[str, Any]]) -> None:
        event = {
            "Records": [
                {
                    "messageId": m["MessageId"],
                    "receiptHandle": m["ReceiptHandle"],
                    "body": m["Body"],
                    "attributes": m.get("Attributes", {}),
                    "eventSource": "aws:sqs",
                }
                for m in messages
            ]
        }
        self.invocations += 1
        cmd = [
            sys.executable,
            "-m",
            "fxworld.localqueues.lambda_child",
            str(self.time_limit),
            str(self.margin),
            str(self.lease),
        ]
        with open(self.log, "ab") as err:
            proc = subprocess.Popen(
                cmd,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
            )
            try:
                out, _ = proc.communicate(json.dumps(event).encode(), timeout=self.time_limit)
            except subprocess.TimeoutExpired:
                proc.kill()  # the time limit: Lambda ends the function
                proc.wait()
                self.killed += 1
                return
        if proc.returncode != 0:
            self.crashed += 1
            return
        failed = {f["itemIdentifier"] for f in json.loads(out)["batchItemFailures"]}
        for m in messages:
            if m["MessageId"] not in failed:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"])
                self.deleted += 1
