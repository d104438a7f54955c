# A Redis proxy for tests/integration/check.rs: it runs one script (the file
# named by its second argument, called with EVALSHA or EVAL) as separate
# commands, as a server whose scripts are not atomic does (Garnet outside its
# transaction mode); every other command passes through to the Redis server
# on the port named by its first argument, one upstream connection per client.
# Prints the port it listens on, then serves until killed.
import hashlib, socket, sys, threading

upstream_port = int(sys.argv[1])
script = open(sys.argv[2], 'rb').read()
sha = hashlib.sha1(script).hexdigest().encode()

def read_reply(f):
    line = f.readline()
    if not line:
        raise EOFError
    kind, rest = line[:1], line[1:-2]
    if kind in b'+-:':
        return line
    if kind == b'$':
        n = int(rest)
        return line if n < 0 else line + f.read(n + 2)
    if kind == b'*':
        n = int(rest)
        out = line
        for _ in range(max(n, 0)):
            out += read_reply(f)
        return out
    raise ValueError(line)

def read_command(f):
    line = f.readline()
    if not line:
        raise EOFError
    args = []
    for _ in range(int(line[1:-2])):
        n = int(f.readline()[1:-2])
        args.append(f.read(n + 2)[:-2])
    return args

def encode(args):
    out = b'*%d\r\n' % len(args)
    for a in args:
        out += b'$%d\r\n%s\r\n' % (len(a), a)
    return out

def serve(client):
    up = socket.create_connection(('127.0.0.1', upstream_port))
    cf, uf = client.makefile('rb'), up.makefile('rb')
    def call(args):
        up.sendall(encode(args))
        return read_reply(uf)
    try:
        while True:
            args = read_command(cf)
            name = args[0].upper()
            if name in (b'EVALSHA', b'EVAL') and (args[1] == sha or args[1] == script):
                key, steps, life = args[3], int(args[4]), args[5]
                call([b'HINCRBY', key, b'n', b'0'])
                call([b'PEXPIRE', key, life])
                for _ in range(steps):
                    call([b'HINCRBY', key, b'n', b'1'])
                reply = call([b'HGET', key, b'n'])
                value = reply.split(b'\r\n')[1]
                client.sendall(b':' + value + b'\r\n')
            else:
                client.sendall(call(args))
    except (EOFError, OSError):
        pass
    finally:
        client.close()
        up.close()

listener = socket.socket()
listener.bind(('127.0.0.1', 0))
listener.listen(16)
print(listener.getsockname()[1], flush=True)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
