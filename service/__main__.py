from service.cli.main import app

app(prog_name="gangplank")
