"""What the tests run in processes of their own: the app, the CLI, distributed ranks and
workers, a computing process's start, a stand-in compiler."""
