"""``python -m longcall``: the ``longcall`` command."""

from longcall.cli import main

main(prog_name="longcall")
