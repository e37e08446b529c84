from makeroom.cli.main import main

main()
