"""What `make docs` runs: the tables of docs/ made from the code, the Grafana dashboards, and
the screenshots of serve's pages. Tests fail while a checked-in table or dashboard differs."""
