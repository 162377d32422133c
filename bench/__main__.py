"""Dispatch `python -m bench <command> ...` to the command's module's main(argv)."""

import importlib
import sys

# command -> module of bench
COMMANDS = {
    "locomo": "locomo_recall",
    "learn": "secom.learn",
    "queryforms": "query_forms",
    "secompresent": "secom_present",
    **{
        c: c
        for c in (
            "segmentation",
            "scale",
            "cost",
            "qa",
            "teafarm",
            "graph",
            "replyprobe",
            "closeprobe",
            "bm25",
            "knowledge_update",
            "answers",
            "relations",
            "changed_pairs",
            "refusals",
            "refinecalls",
            "replyspeed",
            "replies",
        )
    },
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: python -m bench {{{','.join(COMMANDS)}}} [options]  (each takes --help)")
        return 2
    mod = importlib.import_module(f"bench.{COMMANDS[argv[0]]}")
    return mod.main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
