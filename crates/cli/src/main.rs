fn main() {
    quiclab::main()
}
