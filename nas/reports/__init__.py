"""Reports of finished runs: the HTML page of a run folder and a comparison's tables and plot."""
