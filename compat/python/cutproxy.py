"""A TCP proxy (127.0.0.1 only) that cuts client connections during produce traffic.

It parses the Kafka request frames going client -> broker (4-byte length + api key). At chosen Produce
requests (counted over all connections) it cuts the connection:
  - "after": the whole Produce request reaches the broker, the proxy waits a moment so the broker appends
    it, then drops the response and aborts both sockets: the client never learns the batch was written and
    must retry it; an idempotent producer's retry must be recognised as a duplicate.
  - "partial": only the first half of the Produce request is forwarded before the cut.
The broker must advertise the proxy's address (so reconnections come back through the proxy).
"""
import asyncio
import struct
import threading


class CutProxy:
    def __init__(self, listen_port, upstream_host, upstream_port, cut_plan):
        """cut_plan: dict produce_request_number (1-based) -> "after" | "partial"."""
        self.listen_port = listen_port
        self.upstream = (upstream_host, upstream_port)
        self.cut_plan = dict(cut_plan)
        self.produce_requests = 0
        self.cuts = []  # (kind, produce_request_number)
        self.connections = 0
        self.errors = []
        self._loop = None
        self._server = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("proxy did not start")
        if self.errors:
            raise RuntimeError(self.errors[0])

    def stop(self):
        if self._loop:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _run(self):
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", self.listen_port))
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"proxy listen failed: {e}")
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, creader, cwriter):
        self.connections += 1
        try:
            breader, bwriter = await asyncio.open_connection(*self.upstream)
        except OSError as e:
            self.errors.append(f"upstream connect failed: {e}")
            cwriter.transport.abort()
            return
        state = {"cut": False}

        def cut():
            state["cut"] = True
            cwriter.transport.abort()
            bwriter.transport.abort()

        async def client_to_broker():
            try:
                while not state["cut"]:
                    hdr = await creader.readexactly(4)
                    (size,) = struct.unpack(">i", hdr)
                    body = await creader.readexactly(size)
                    api_key = struct.unpack(">h", body[:2])[0] if size >= 2 else -1
                    action = None
                    if api_key == 0:
                        self.produce_requests += 1
                        action = self.cut_plan.pop(self.produce_requests, None)
                    if action == "partial":
                        bwriter.write(hdr + body[: size // 2])
                        await bwriter.drain()
                        await asyncio.sleep(0.05)
                        self.cuts.append(("partial", self.produce_requests))
                        cut()
                        return
                    if action == "after":
                        state["cut"] = True  # from now on nothing goes back to the client
                        bwriter.write(hdr + body)
                        await bwriter.drain()
                        await asyncio.sleep(0.3)  # let the broker append (and answer into the void)
                        self.cuts.append(("after", self.produce_requests))
                        cut()
                        return
                    bwriter.write(hdr + body)
                    await bwriter.drain()
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                pass
            finally:
                if not state["cut"]:
                    bwriter.transport.abort()

        async def broker_to_client():
            try:
                while True:
                    data = await breader.read(65536)
                    if not data or state["cut"]:
                        break
                    cwriter.write(data)
                    await cwriter.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                if not state["cut"]:
                    cwriter.transport.abort()

        await asyncio.gather(client_to_broker(), broker_to_client())
