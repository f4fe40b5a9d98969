"""``python -m longcall``: the ``longcall`` command."""

from longcall.cli.main import main

main(prog_name="longcall")
