// Test vectors for the SSH key, user-authentication and fuzz tests, made by
// the real tools (not by keel): the keys with OpenSSH 9.2's ssh-keygen
// (-t ecdsa -b 256, -t rsa -b 3072, -t rsa -b 1024, -t ed25519, -t ecdsa -b
// 384), the fingerprints as `ssh-keygen -lf` printed them, the signatures
// with paramiko 2.12 (sign_ssh_data: SSH signature blobs) -- kData signed as
// is, the k*AuthSig over RFC 4252 §7's data for user "alice", service
// "ssh-connection", session id kSessionId.
//
// Thread-safety: constants only.
#pragma once

#include <string>
#include <string_view>

namespace keel::ssh::testvec {

inline std::string unhex(std::string_view h) {
  std::string out;
  auto nib = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    out.push_back(static_cast<char>(nib(h[i]) * 16 + nib(h[i + 1])));
  return out;
}

inline const std::string kEcLine =
    "ecdsa-sha2-nistp256 "
    "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBIJTxBOqpggx5KJ3NSADziRzIgJchoQcfqVzBXRvBxKGKjR/"
    "TNkUsX9blCQflaNCZFy+b86OseqcVh6ROpzmgUI= alice@test";
inline const std::string kRsaLine =
    "ssh-rsa "
    "AAAAB3NzaC1yc2EAAAADAQABAAABgQCTrTlP9kE601nstS8tnxgNDa6iQoceIzOWhup51VL6VClFK5ztNoUyjL/"
    "hHtzZqMEC72skM3znbXlMxgSpJsxPoYH4XUk9kJ3XWKIwjyZlPX2CKzf3QEqVJR5Gan2GBlXJuZzqpOFatgjwMwCO9bWGy1VWF/SFB/"
    "1sIsYTlHlsfH/"
    "cnDjif7WLekGyDq8OEFuESwQLyjzCuLLY9t9eec43YAenPMkWjXt5QYyXMOhRZnq8sYeRVGAgLlBhjuGOMNXiNsHaCb4jqQBegCnEzom"
    "ctuVudrGZhcEPPbYyEIapAqs0X1qgRZTcI860RWOeykDvIrV7UJWf+B56cDEGuE1VFxMYde3M+"
    "bXc7tLmeIMuzQoueSA6WjUS7OvKxkDgtaq5fQGXaBpLXnbKttTGfBb7PE3Wy1N1ynHOs1gHKZd3n2eaDZjgY5uredFs4s/"
    "bJVdaM7VFtZ55pSGMStGarWyJIFVHQY/kyBy9KFAGdYQaP8AZUzfST8k0QxhrBR/oXdU= bob@test";
inline const std::string kRsa1024Line =
    "ssh-rsa "
    "AAAAB3NzaC1yc2EAAAADAQABAAAAgQCyi+k8XAP75eQ8tMYgzk/"
    "Dg1cXzsREWVBvywniWQOBpXB9jOFDZCN08tFn+"
    "zQX5Heb3xPIzaEQTP5YzxUzuoTYwjRUMEPXmFcNqIQqAo163HNZr7wlotEIcIMj63jTPzmQ9n4wRApZRScNQYZKN6DdloTzuIvBj9/"
    "7u5tKTtYnlQ== small";
inline const std::string kEd25519Line =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMRtXEd+SbiaSe1ctbC9GTIPc9F61u0OX/gmKnQvU0k6 ed";
inline const std::string kEc384Line =
    "ecdsa-sha2-nistp384 "
    "AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBIyx/9vHTfADinM/"
    "Y+taCPuXhAqxQ3uabkogGvOC1rL3nJucUue1B0wTeBYMkhna/jFzbysqWpkglq+idYHFktbaI/WHg35B3NXQ/"
    "SLOZfiOndsRC8sWw3OuVGh4bMGRyw== root@vm";
inline const std::string kEcFingerprint = "SHA256:1eMg1CVOxxHS0Gl3a8cmWnIWfgwvMNIUrzPc8Pcc/Ds";
inline const std::string kRsaFingerprint = "SHA256:kRRlNkeVkIWKAfaTeswjG7NdHNEK8zOtoxQx8dsjUtY";
inline const std::string kData =
    unhex("73657373696f6e2d646174612d000102207369676e6564206279206b65656c207465737473");
inline const std::string kEcSig = unhex(
    "0000001365636473612d736861322d6e697374703235360000004a0000002100ef57991d419a19010038de0a6a736eb810c5193b"
    "1e7518d6762b3465d92b21200000002100c0a19336915e594866e19174b90b8dd6f1bb1785c1cc5e2b991b5dd4b5494859");
inline const std::string kRsa256Sig = unhex(
    "0000000c7273612d736861322d3235360000018006f4f37c267c79575650e7d014727647793a9b7b25925a8bcaa675a6e54ac6c2"
    "a7aa637c0ebb2df083dda01328243856b6e246b3e64c6df0d9afdace3263e2e1f3ed0f314521487ad1bbf385f2f7a323f7d6cc18"
    "07bb8953a3789a663a61e269668e1e54d17b88dfa494dc1a29978218a094a333e8cc0dd8adfc21e2c6289dc90c188f95fe91f37d"
    "70cbe1f8b50d362eac4874d6caf0616349c260fcb04978e76ce2216f4e4ce6b1ef59c40e26f82a4b71e30fe08feb7bfca6001031"
    "50be81c8d833c5ef4ba8975e712e2323d489fea00cc28b6ae4aa0ff21e83d7e67f747db295c855945965f559a007d8523d0afa93"
    "e6b946181f01e07c4bd1afb60e770642966633c1a67284a6ca1a7cf78291dce865d7857e983b2ee8d4077c34475246ff3cc7e11d"
    "71aa35b09490b2d57ff345d519a90a3b03d2965ece0fe27adaef42c4090b639de4107c6460e15da5a88ea7a145c2a94305809693"
    "3bbd8701f7db687b8ca97e4f059e28b7bcd58e20af40347396eed996b5158851bc5bba36d1601832");
inline const std::string kRsa512Sig = unhex(
    "0000000c7273612d736861322d353132000001808c0e32bc1fe00a892dd45a746af97187d45c1a21962e22e417850c4520abae66"
    "0f97c6bee6b4c8a57d692c9aa93fa7fee92e7253ffa63453162eb421af069dc5fa49205b8736dc235fe53bd74b79ba536603bbe4"
    "0f9f61efaf5bb7c504f747678f1e4ec039f1ed92a6398a8891100695b9460dfc8e4e4355fd2bd615317974821f27cc58ea75f91f"
    "d51ccc566e91188d2259275735a2c336b5453ff82800b1c94d5e976ef66ebcea8ac81d82b0f4d420e2d97e378db7b8d5789d0228"
    "caf1452e0845343b5542e8d64d5150b7efa2cb06e37cfe5e8c725d6682717e27f84446e321e9ec24b462c6271ae7b3e8a9f17f7d"
    "420fb82e688695cfcb8d18fedd06a09e480564a6e728d22d2e61c80045d7b61e3a983ba8a944880e2d36ba9b78a87167d8bc66fe"
    "d2ef8e62d0f33525ddb838703e22297e6d182ac3dcf08ad47b226b3d1ef2cb744847b6251aa7c36e5cad0320d778e2809a9a5afc"
    "b9967f583044df5334767d0f153d2f4fb3513c562566424a682b1ffb11d815ce3620e1b3d2e4307b");
inline const std::string kRsaSha1Sig = unhex(
    "000000077373682d727361000001804b03e4c85448d04c2b13addf72e024384cf54fba9b58061cd9bf7dc10e57e2ef5b9b3f13fc"
    "94d26d0d2ffcfbc6609a9e03f4afbfad59c814755d541b9d5f78a98b83ef9c33f2dfd05b53e9ff0d4dd59b5f34af729e697f1294"
    "21d25cd459159ab03288f57bce78eceb0b748110bc9f4b279d5ac004696a72e1436c65d715b034ad97c6eafe05f7f186a938f174"
    "80ef2b52df23ca340e8883811ad24e1c3f4bf0cdb43c5e5f1350898254148c8e21dcca77f85b5d79957fb04dd606097327f3fe22"
    "5ce9dc93d10a59f0d042828925b8615f389cda8abb4f9d21d264073be2567af7f79697045303510b63584796ff9e98dc2bb1e675"
    "e70ec22059a0c33864e525ffb2a6cf72334b37b1a5eb828bc5a1f27b5f3e7a4e03ce040eb2b17ec7c2f0c34834552290febd864f"
    "9c7fd3f9d4b6b8e021c539c2ef2d3daa42ad56e1337868fc18ba0e74e2884ac3b57be586e08c628c316764d42ece61bb3e27d2c6"
    "c9a31850aef3a49066d5579630952bbd0e5ce0abfb5dc14b0e1730845263c8ee81a39c");
inline const std::string kSessionId =
    unhex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
inline const std::string kAliceEcAuthSig = unhex(
    "0000001365636473612d736861322d6e697374703235360000004800000020762b5db5b1dad4515f2e6780f6e32fe54ad368e44f"
    "fe0bd131645e1226a7803e000000202be4b0cc6cd50fbdd3b47ca792ca6c9a7233235e76a0ca6915b30584a6325b4a");
inline const std::string kAliceRsa512AuthSig = unhex(
    "0000000c7273612d736861322d35313200000180726fe907c6e681661712e5bd16384c879ddfaca822cb75ca24ac1d27e7b624d5"
    "1630a07e62c72d2ec9091dfe781ffa8ed16b19cd10902685ce5d39bd06225975efa0d08da9c6016b4fa2ba56d7034404b6140b2d"
    "6249867afa8daa998396c25d8a3ae0862c22a1862f11005177d099fe7886d9798e0af198c9666f0c2537e763c0b22ed61a6bc4b3"
    "1ae04a89674dce3fa9928c003ba97194f33bbf04490b4dca17e2bb4596d100e52119aa73dfda540925dfd87b556fe87d51026382"
    "a2405c59f77dfc56b0bdebba6b93d9bfc7c547ef9835f835bdf78d95b6f19c6ed322a75904a3fe4c2724a2a473c337fa618e4712"
    "cba32b3427845099c0e5b9c013d4eae56e789adfaf85aaf726eaf3d05a1ad3444ab8f0c1b75b91c20cb28b624c39817df9778826"
    "286a3c229ced6f5de847cb3145a2d5c5ef9f0752af7c59437896b375f40b7dc0d3126ba14be8b862e0ab8ddfce53d7e81cb9f4ab"
    "0c7b33cfb2a2e905c601c8f711096b0962735605f484d548154461f6beeb7c8114ced423a113e9a3");
inline const std::string kAliceRsaSha1AuthSig = unhex(
    "000000077373682d727361000001807a7812eba6ed724c95dd6763b849da78dcdc739fcc43c1deda8a4b0a82bec10fea9695a63b"
    "281073c53087b8836eec2b7d87c7738530db0002ce3ee7b11832276aa9e2c403c07a15b034e7af502655369453dc1d3f0725dbb7"
    "692f2fea888d390deabbaf76c97603302becc78bc82d3803c03f6d2e43051012b0a8eae50aadae948e83bd40283505bdeed848b2"
    "92c201e83c02a16eca0a40a63ae9fbee0f2af1637d249e6b24a9a5709fdae2bbb9321ae59cb63c1d10e9e279860b6bd8efbcbb46"
    "1e81c5ec52057fda0c798a22bd6d9cec97b5ec20505855ff698e8c00ee5846de53470ac030e2a2828724d6d645b39c9760349637"
    "1192afbc0cac9da428307931ed5cf71eceec0648bbb8a84bbf21d0d80812cd0f1daf28fcdab66849fb8a363bfd6809d7aeeb47eb"
    "5d8cf0348b93f719596995e2d67067fd7012164c6cc44ac6a042549568871b18e5a2752147ac41b267e586539caf7635d8f1f12c"
    "c34959f0b64c9bcbc2e8ac88aee672c98d829187128af6ac8c4b0e61a9ec77165c332d");

}  // namespace keel::ssh::testvec
