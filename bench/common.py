"""What every bench module shares: the checkout root, the two pinned cores, the log line."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROKER_CPU = "0"
CLIENT_CPU = "1"


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)
