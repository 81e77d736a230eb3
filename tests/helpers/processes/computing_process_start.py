"""Start the window's computing process (`engine/process/computing.serve`, multiprocessing "spawn")
as `gui.threads.worker.Worker` does, without Qt, and print what it says until it is ready: one JSON
line a message, {"kind": class name, "text": a Notice's text, "lstm": a Ready's LSTM
implementation}, then {"lstmviz": the path of the lstmviz package it imported}. For
tests/engine/test_native_first_run.py, run by an installed copy's Python."""

import json
import multiprocessing
import sys
import tempfile


def main() -> None:
    import lstmviz
    from lstmviz.engine.process import messages
    from lstmviz.engine.process.computing import serve

    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    with tempfile.TemporaryDirectory() as folder:
        process = context.Process(target=serve, args=(theirs, folder), daemon=True)
        process.start()
        theirs.close()
        while True:
            message = ours.recv()
            line = {"kind": type(message).__name__}
            if isinstance(message, messages.Notice):
                line["text"] = message.text
            if isinstance(message, messages.Ready):
                line["lstm"] = message.device["lstm"]
            print(json.dumps(line), flush=True)
            if isinstance(message, messages.Ready | messages.Broken):
                break
        ours.send(messages.Close())
        process.join(30)
    print(json.dumps({"lstmviz": lstmviz.__file__}), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
