"""The ``mtl-opt`` parser as the CLI page renders it (sphinx-argparse): every command and option,
without the epilogs, which are terminal text (exit codes, output-path rules) that the page
states in its own words above the reference."""

import argparse

from mtl_opt.cli import build_parser


def parser() -> argparse.ArgumentParser:
    top = build_parser()
    stack = [top]
    while stack:
        current = stack.pop()
        current.epilog = None
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
    return top
