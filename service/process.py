"""Helpers for the processes a service starts (Kafka validation workers, split mode's HTTP process)."""
from __future__ import annotations

import os
import threading
import time


def exit_with_parent(parent: int) -> None:
    """Leave when the process that started this one is gone (a SIGKILLed service must not leave
    its helpers behind). Call it first thing in the child."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)
    threading.Thread(target=watch, name="gangplank-parent-watch", daemon=True).start()
