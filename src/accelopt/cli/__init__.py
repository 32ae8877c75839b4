"""The command line: typer commands over the layers below."""
