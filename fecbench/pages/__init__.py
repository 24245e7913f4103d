"""Web pages as dependency graphs of downloads and computations (the page-load workload): the graph, the
formats people have (HAR, Epload), and the corpus of real pages in pages/."""
