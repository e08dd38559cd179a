"""What the security tests share: test certificates (certs.py), a JWKS server and token
minter on loopback (oauth.py), each client's TLS/SASL settings (client_configs.py), and a
node started with Kafka's listener, TLS and SASL settings (secure_node.py)."""
