"""`railforge queue`'s table from the scheduler's state document (the dashboard's /api/state, as
railforge.k8s.dashboard.state_document writes it): running gangs by start, then waiting ones in submission order,
their expected starts (a reservation's, or the plan's behind it), the reason last; the command against the test
bed's scheduler is tests/k8s/test_scheduler_metrics.py."""

import calendar
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from railforge.cli import main
from railforge.k8s.queuelist import rows, table

NOW = calendar.timegm(time.strptime("2026-11-29 08:00", "%Y-%m-%d %H:%M"))
STATE = {
    "running": [
        {"gang": "ml/late", "queue": "team-b", "gpus": 8, "pods": 1, "nodes": ["n3"], "started": NOW - 60},
        {"gang": "ml/early", "queue": "team-a", "gpus": 16, "pods": 3, "nodes": ["n2", "n1"], "started": NOW - 5400},
    ],
    "pending": [
        {"gang": "ml/big", "queue": "team-a", "gpus": 32, "pods": 5, "submitted": NOW - 30, "reason": "needs 32 GPUs",
         "reserved_start": NOW + 240, "reserved_nodes": ["n1", "n2", "n3", "n4", "n5"]},
        {"gang": "ml/small", "queue": "", "gpus": 1, "pods": 1, "submitted": NOW - 10, "reason": "behind ml/big",
         "reserved_start": None, "reserved_nodes": [], "expected_start": NOW + 600},
        {"gang": "ml/open", "queue": "", "gpus": 8, "pods": 1, "submitted": NOW - 5, "reason": "cannot be reserved",
         "reserved_start": None, "reserved_nodes": [], "expected_start": None},
    ],
}  # fmt: skip


def test_running_by_start_then_waiting_in_order_with_expected_starts():
    assert rows(STATE, NOW) == [
        ("team-a", "ml/early", "running", "16", "3", "n1,n2", "2026-11-29T06:30Z (90m ago)", ""),
        ("team-b", "ml/late", "running", "8", "1", "n3", "2026-11-29T07:59Z (60s ago)", ""),
        ("team-a", "ml/big", "reserved", "32", "5", "n1,n2,n3,...(+2)", "2026-11-29T08:04Z (in 4m)", "needs 32 GPUs"),
        ("-", "ml/small", "waiting", "1", "1", "-", "2026-11-29T08:10Z (in 10m)", "behind ml/big"),
        ("-", "ml/open", "waiting", "8", "1", "-", "-", "cannot be reserved"),
    ]
    assert [row[1] for row in rows(STATE, NOW, queue="team-a")] == ["ml/early", "ml/big"]


def test_the_table_aligns_every_column_but_the_reason():
    lines = table(rows(STATE, NOW, queue="team-b"))
    assert lines == [
        "QUEUE   GANG     STATE    GPUS  PODS  NODES  START                        REASON",
        "team-b  ml/late  running  8     1     n3     2026-11-29T07:59Z (60s ago)",
    ]


def test_a_standby_replica_s_answer_says_so_and_names_the_leader(capsys):
    class Standby(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"leader": False, "leader_identity": "railforge-scheduler-7d9f-1", **STATE}).encode()
            self.send_response(200 if self.path == "/api/state" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Standby)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert main(["queue", "--url", f"http://127.0.0.1:{server.server_port}", "--queue", "team-b"]) == 0
    finally:
        server.shutdown()
    out, err = capsys.readouterr()
    assert err == (
        "railforge queue: answered by a standby replica, which schedules nothing; the leader: "
        "railforge-scheduler-7d9f-1\n"
    )
    assert out.splitlines()[1].startswith("team-b  ml/late  running")
