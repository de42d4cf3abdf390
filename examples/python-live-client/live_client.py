#!/usr/bin/env python3
"""A LiveFeed client in Python: authenticates with a customer API key, subscribes to
livefeed.v1.LiveFeed and prints one line per heartbeat and per trailer update.

Generate the message classes first (Debian: apt-get install protobuf-compiler python3-grpcio;
protoc >= 3.15 for proto3 `optional`):

    protoc -I proto --python_out=examples/python-live-client/generated proto/livefeed/v1/livefeed.proto
    python3 examples/python-live-client/live_client.py --api-key twc_... [--auth-url http://localhost:8080] [--target localhost:50051] [--count N]

Only the messages are generated (`--python_out`): the one streaming call is made with
`channel.unary_stream`, so no grpcio-tools plugin is needed (Debian's python3-grpc-tools 1.14 bundles a
protoc older than 3.15, which refuses the proto).
"""
import argparse
import json
import os
import sys
import urllib.request



def customer_token(auth_url: str, api_key: str) -> str:
    request = urllib.request.Request(f"{auth_url}/api/v1/customers/authenticate", method="POST", headers={"X-API-KEY": api_key})
    with urllib.request.urlopen(request) as response:
        return json.load(response)["access_token"]


def describe(message) -> str:
    if message.is_heartbeat:
        return "heartbeat"
    update = message.live_update
    trailer = update.trailer
    line = f"fleet {update.fleet_id} ({update.fleet_name}) trailer {trailer.unit_id or trailer.id} {trailer.vin} {trailer.status.name}"
    line += f" faulted={trailer.faulted_devices} warning={trailer.warning_devices}"
    if trailer.HasField("telemetry"):
        fix = trailer.telemetry
        line += f" {fix.lat:.5f},{fix.long:.5f} {fix.speed:.1f} mph {fix.heading}"
    return line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--auth-url", default="http://localhost:8080")
    parser.add_argument("--target", default="localhost:50051")
    parser.add_argument("--count", type=int, default=0, help="stop after this many messages")
    parser.add_argument("--generated", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "generated"), help="where protoc wrote livefeed/v1/livefeed_pb2.py")
    args = parser.parse_args()
    sys.path.insert(0, args.generated)
    global grpc, livefeed_pb2
    import grpc
    from livefeed.v1 import livefeed_pb2

    token = customer_token(args.auth_url, args.api_key)
    with grpc.insecure_channel(args.target) as channel:
        subscribe = channel.unary_stream(
            "/livefeed.v1.LiveFeed/Subscribe",
            request_serializer=livefeed_pb2.SubscribeRequest.SerializeToString,
            response_deserializer=livefeed_pb2.LiveUpdateResponse.FromString,
        )
        try:
            for seen, message in enumerate(subscribe(livefeed_pb2.SubscribeRequest(), metadata=[("authorization", f"Bearer {token}")]), 1):
                print(describe(message), flush=True)
                if args.count and seen >= args.count:
                    return 0
        except grpc.RpcError as error:
            print(f"stream ended: {error.code().name} {error.details()}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
