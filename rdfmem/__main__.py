from rdfmem.cli import main

main()
