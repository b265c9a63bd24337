from wrapper.entry import main

main()
