from fecbench.cli import main

main()
