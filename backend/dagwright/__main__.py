from dagwright.cli.main import app

app()
