"""chatsite's benchmark harness: `python -m bench --help`, or `make bench` for the quick run.

It starts chatsite itself (daphne processes on loopback), drives it with WebSocket clients in
separate processes speaking the JSON subprotocol, and writes a table, a JSON report and plots
to bench/results/.
"""
